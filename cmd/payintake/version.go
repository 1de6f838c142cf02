package main

import (
	"context"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/internal/observe"
)

// cmdVersion: `payintake version` (and `payintake --version`) prints what
// the binary was built from: the module version, the VCS revision, Go's
// version.
func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs, _ := newFlagSet("version", stderr)
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("use: version")
	}
	fmt.Fprintln(stdout, observe.BuildInfo())
	return nil
}

// registerBuildInfo adds payintake_build_info{version,revision,goversion} 1,
// so that dashboards and alerts can tell which release each server runs.
func registerBuildInfo(reg prometheus.Registerer) {
	b := observe.BuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "payintake_build_info",
		Help:        "Always 1; its labels say what this server was built from.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion}})
	g.Set(1)
	reg.MustRegister(g)
}
