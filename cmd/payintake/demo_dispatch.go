package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	outbound "github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/records"
)

// demoVendorPath is where serve --demo serves its demo payroll vendor.
const demoVendorPath = "/demo/vendor"

// mountDemoVendor serves the demo vendor (pays each key once, answers 207 or
// 429 now and then) on the HTTP address.
func mountDemoVendor(mux *http.ServeMux) {
	mux.Handle("POST "+demoVendorPath, &outbound.Vendor{Every207: 7, Every429: 5})
}

// setupDemoDispatch adds target "demo" (the demo vendor on httpAddr) and
// gives it to partner demo, unless the partner has another target, then
// says how to watch a period dispatched.
// cli is how a printed line runs payintake (demoCLI).
func setupDemoDispatch(ctx context.Context, st *records.Store, httpAddr net.Addr, cli string, stdout io.Writer) error {
	url := "http://" + httpAddr.String() + demoVendorPath
	ds := outbound.NewStore(st.Pool())
	if err := ds.PutTarget(ctx, outbound.Target{Name: "demo", URL: url, RateLimit: outbound.DefaultRateLimit,
		ChunkSize: 20, MaxAttempts: outbound.DefaultMaxAttempts, RetryBase: outbound.DefaultRetryBase,
		Timeout: outbound.DefaultTimeout, LineStatus: true}); err != nil {
		return err
	}
	p, err := st.Partner(ctx, "demo")
	if err != nil {
		return err
	}
	if p.Target == "" {
		t := "demo"
		if err := st.UpdatePartner(ctx, "demo", records.PartnerUpdate{Target: &t}); err != nil {
			return err
		}
		p.Target = t
	}
	fmt.Fprintf(stdout, `Partner demo dispatches to target %q (a demo payroll vendor at %s). Once the
sample is processed, lock its period and watch it dispatched:

  %s records lock --partner demo --period 2026-11
  %s dispatch status --partner demo

`, p.Target, url, cli, cli)
	return nil
}
