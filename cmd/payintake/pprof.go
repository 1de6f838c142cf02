package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"
)

// servePprof serves Go's profiler on addr (a loopback address only: profiles
// show the program's internals) until ctx ends. Used to see where an
// upload's time goes: `go tool pprof http://ADDR/debug/pprof/profile?seconds=10`.
func servePprof(ctx context.Context, wg *sync.WaitGroup, addr string, log *slog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--pprof-addr %s: give a loopback address such as 127.0.0.1:6060", addr)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return usagef("--pprof-addr %s: the profiler is served on loopback addresses only (127.0.0.1 or ::1)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on --pprof-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() {
		log.Info("profiler listening", "addr", ln.Addr().String())
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("profiler", "err", err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	})
	return nil
}
