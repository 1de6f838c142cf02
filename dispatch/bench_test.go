package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDispatch dispatches n due lines (chunks of 200) to a local
// vendor with no rate limit, then POSTs the same chunk bodies under the same
// keys with a bare http.Client to the same vendor, in the same run, and
// reports both times, their ratio and the dispatcher's peak heap (sampled
// every 10 ms while it runs). Run it with
//
//	go test -run '^$' -bench BenchmarkDispatch -benchtime 1x ./dispatch
func BenchmarkDispatch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				e := newEnv(b, Target{ChunkSize: 200, MaxAttempts: 5})
				var requests atomic.Int64
				fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					requests.Add(1)
					w.WriteHeader(http.StatusOK)
				}))
				if _, err := e.store.Pool().Exec(e.ctx, `UPDATE dispatch_targets SET url = $1, rate_limit = 0`, fast.URL); err != nil {
					b.Fatal(err)
				}
				e.ingest("big.csv", payroll(n, "2026-11"))
				e.lock("2026-11")
				d := New(e.store.Pool(), Config{})
				runtime.GC()
				var base runtime.MemStats
				runtime.ReadMemStats(&base)
				var peak atomic.Uint64
				stop := make(chan struct{})
				sampled := make(chan struct{})
				go func() {
					defer close(sampled)
					t := time.NewTicker(10 * time.Millisecond)
					defer t.Stop()
					for {
						var m runtime.MemStats
						runtime.ReadMemStats(&m)
						if m.HeapInuse > peak.Load() {
							peak.Store(m.HeapInuse)
						}
						select {
						case <-stop:
							return
						case <-t.C:
						}
					}
				}()
				b.StartTimer()
				start := time.Now()
				runs, err := d.Dispatch(e.ctx, "acme", "2026-11")
				took := time.Since(start)
				b.StopTimer()
				close(stop)
				<-sampled
				if err != nil || len(runs) != 1 || runs[0].State != RunComplete || runs[0].Settled != n {
					b.Fatalf("dispatch: %v %+v", err, runs)
				}
				sent := requests.Load()
				// The same chunks, from the ledger, POSTed by a bare client.
				bodies, keys := sameChunks(b, e, 200)
				client := &http.Client{}
				bstart := time.Now()
				for i, body := range bodies {
					req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, fast.URL, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", keys[i])
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				bare := time.Since(bstart)
				fast.Close()
				peakMB := float64(peak.Load()-min(peak.Load(), base.HeapInuse)) / (1 << 20)
				b.ReportMetric(took.Seconds(), "dispatch_s")
				b.ReportMetric(bare.Seconds(), "bare_post_s")
				b.ReportMetric(took.Seconds()/bare.Seconds(), "ratio")
				b.ReportMetric(peakMB, "peak_heap_growth_MB")
				b.Logf("SUMMARY dispatch bench: %d lines, %d requests: dispatch %.2f s, bare POSTs of the same %d chunks %.2f s, ratio %.1f×, peak heap growth %.1f MB",
					n, sent, took.Seconds(), len(bodies), bare.Seconds(), took.Seconds()/bare.Seconds(), peakMB)
			}
		})
	}
}

// sameChunks rebuilds the chunks the dispatcher sent from the ledger.
func sameChunks(b *testing.B, e *env, size int) ([][]byte, []string) {
	rows, err := e.store.Pool().Query(e.ctx, `SELECT l.key, l.line FROM dispatch_due d JOIN dispatch_ledger l ON l.key = d.key ORDER BY d.id`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	batch := BatchKey("acme", "2026-11", 1)
	prefix := []byte(`{"batch_key":"` + batch + `","partner":"acme","pay_period":"2026-11","lines":[`)
	var bodies [][]byte
	var keys []string
	var cur []byte
	var ck []string
	flush := func() {
		if len(ck) == 0 {
			return
		}
		bodies = append(bodies, append(cur, ']', '}'))
		keys = append(keys, ChunkKey(batch, ck))
		cur, ck = nil, nil
	}
	for rows.Next() {
		var k string
		var line []byte
		if err := rows.Scan(&k, &line); err != nil {
			b.Fatal(err)
		}
		if cur == nil {
			cur = append([]byte(nil), prefix...)
		} else {
			cur = append(cur, ',')
		}
		cur = append(cur, line...)
		ck = append(ck, k)
		if len(ck) == size {
			flush()
		}
	}
	flush()
	return bodies, keys
}
