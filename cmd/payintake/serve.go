package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/payintake/payintake/intake/httpapi"
	"github.com/payintake/payintake/review"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("serve", stderr)
	httpAddr := fs.String("http-addr", "127.0.0.1:8080", "address of the HTTP API, /metrics and /healthz")
	fs.String("sftp-addr", "127.0.0.1:2022", "address of the SFTP drop zone")
	fs.Bool("demo", false, "add a demo partner with a fresh key pair and print the sftp command")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("serve takes no arguments besides flags")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	e, err := g.open(ctx, log, 0)
	if err != nil {
		return err
	}
	defer e.close()

	mux := http.NewServeMux()
	httpapi.Mount(ctx, mux, e.intake, g.dataDir) // HTTP submissions, webhooks, /v1/openapi.json; reaps old Idempotency-Keys
	review.Mount(mux, e.store, log)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := e.store.Pool().Ping(r.Context()); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fmt.Errorf("listen on --http-addr %s: %w", *httpAddr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("http listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return nil
}
