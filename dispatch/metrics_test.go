package dispatch

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestMetricsAfterDispatch scrapes /metrics (the handler serve mounts)
// after a dispatch that met a 429, a refused line and successes, and finds
// every dispatch series operators rely on: lines by result, requests by
// status, the retry delay and the runs in progress.
func TestMetricsAfterDispatch(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 5, MaxAttempts: 5})
	e.ingest("a.csv", payroll(10, "2026-11"))
	e.lock("2026-11")
	e.v.script = func(n int, r vendorReq) answer {
		switch n {
		case 0:
			return answer{status: 429, header: map[string]string{"Retry-After": "0"}}
		case 1:
			return answer{status: 207, results: func(keys []string) []map[string]any {
				res := []map[string]any{{"key": keys[0], "status": 422, "detail": "unknown employee"}}
				for _, k := range keys[1:] {
					res = append(res, map[string]any{"key": k, "status": 200, "detail": "paid"})
				}
				return res
			}}
		}
		return answer{status: 200}
	}
	reg := prometheus.NewRegistry()
	d := New(e.store.Pool(), Config{Metrics: NewMetrics(reg), Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if _, err := d.Dispatch(e.ctx, "acme", "2026-11"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for _, want := range []string{
		`payintake_dispatch_lines_total{result="succeeded"} 9`,
		`payintake_dispatch_lines_total{result="dead_letter"} 1`,
		`payintake_dispatch_lines_total{result="retried"} 0`,
		`payintake_dispatch_lines_total{result="conflict"} 0`,
		`payintake_dispatch_requests_total{status="429"} 1`,
		`payintake_dispatch_requests_total{status="207"} 1`,
		`payintake_dispatch_requests_total{status="200"} 1`, // chunk 1: 429, then 207 on its retry; chunk 2: 200
		`payintake_dispatch_retry_delay_seconds_count 1`,
		`payintake_dispatch_runs_in_progress 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
