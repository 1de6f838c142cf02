package dispatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDispatch dispatches n due lines (chunks of 200) to a local
// vendor with no rate limit, then POSTs the same chunk bodies under the same
// keys with a bare http.Client to the same vendor, in the same run, and
// reports both times, their ratio and the dispatcher's peak memory (sampled
// every 10 ms while it runs: the live heap after each GC, and the heap in
// use, garbage included). Two vendors: one that answers 200 at once (the
// dispatcher's whole overhead, its database work, shows), and one that takes
// 20 ms an answer (a vendor that does something with 200 payments; real
// payroll APIs take longer). Run it with
//
//	go test -run '^$' -bench BenchmarkDispatch -benchtime 1x ./dispatch
func BenchmarkDispatch(b *testing.B) {
	for _, c := range []struct {
		vendor  string
		latency time.Duration
		sizes   []int
	}{
		{"instant", 0, []int{50_000, 100_000}},
		{"20ms", 20 * time.Millisecond, []int{20_000, 100_000}},
	} {
		for _, n := range c.sizes {
			b.Run(fmt.Sprintf("vendor=%s/lines=%d", c.vendor, n), func(b *testing.B) {
				for range b.N {
					benchDispatch(b, n, c.vendor, c.latency)
				}
			})
		}
	}
}

func benchDispatch(b *testing.B, n int, name string, latency time.Duration) {
	b.StopTimer()
	e := newEnv(b, Target{ChunkSize: 200, MaxAttempts: 5})
	var requests atomic.Int64
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		if latency > 0 {
			// The vendor's round trip, simulated: the time must pass.
			time.Sleep(latency)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer vendor.Close()
	if _, err := e.store.Pool().Exec(e.ctx, `UPDATE dispatch_targets SET url = $1, rate_limit = 0`, vendor.URL); err != nil {
		b.Fatal(err)
	}
	e.ingest("big.csv", payroll(n, "2026-11"))
	e.lock("2026-11")
	d := New(e.store.Pool(), Config{})
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	baseLive := sample[0].Value.Uint64()
	var peakInuse, peakLive uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peakInuse = max(peakInuse, m.HeapInuse)
			metrics.Read(sample)
			peakLive = max(peakLive, sample[0].Value.Uint64())
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var wal0 int64
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&wal0); err != nil {
		b.Fatal(err)
	}
	db := serverCPU(b, e)
	db0, go0 := db(), processCPU()
	b.StartTimer()
	start := time.Now()
	runs, err := d.Dispatch(e.ctx, "acme", "2026-11")
	took := time.Since(start)
	b.StopTimer()
	dbCPU, goCPU := db()-db0, processCPU()-go0
	close(stop)
	<-sampled
	var wal1 int64
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&wal1); err != nil {
		b.Fatal(err)
	}
	walPerLine := float64(wal1-wal0) / float64(n)
	if err != nil || len(runs) != 1 || runs[0].State != RunComplete || runs[0].Settled != n {
		b.Fatalf("dispatch: %v %+v", err, runs)
	}
	sent := requests.Load()
	// The same chunks, from the ledger, POSTed by a bare client.
	bodies, keys := sameChunks(b, e, 200)
	client := &http.Client{}
	bstart := time.Now()
	for i, body := range bodies {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, vendor.URL, bytes.NewReader(body))
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
	mb := func(peak, base uint64) float64 { return float64(peak-min(peak, base)) / (1 << 20) }
	live, inuse := mb(peakLive, baseLive), mb(peakInuse, base.HeapInuse)
	b.ReportMetric(took.Seconds(), "dispatch_s")
	b.ReportMetric(bare.Seconds(), "bare_post_s")
	b.ReportMetric(took.Seconds()/bare.Seconds(), "ratio")
	b.ReportMetric(live, "peak_live_heap_MB")
	b.ReportMetric(inuse, "peak_heap_inuse_MB")
	b.ReportMetric(walPerLine, "wal_bytes/line")
	b.ReportMetric(dbCPU.Seconds()*1e6/float64(n), "db_cpu_us/line")
	b.ReportMetric(goCPU.Seconds()*1e6/float64(n), "go_cpu_us/line")
	b.Logf("SUMMARY dispatch bench, vendor %s: %d lines, %d requests: dispatch %.2f s, bare POSTs of the same %d chunks %.2f s, ratio %.2f×, %.0f bytes of WAL a line, CPU a line: database %.1f µs, this process %.1f µs, peak heap growth: live %.1f MB, in use %.1f MB",
		name, n, sent, took.Seconds(), len(bodies), bare.Seconds(), took.Seconds()/bare.Seconds(), walPerLine,
		dbCPU.Seconds()*1e6/float64(n), goCPU.Seconds()*1e6/float64(n), live, inuse)
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

// processCPU is this process's CPU time so far (user and system): the
// dispatcher's and the local vendor's, a measure of work that the other
// processes on a shared machine do not stretch as they stretch wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU returns a function reading the CPU time (user and system) the
// database server's processes have used so far: the postmaster's children
// alive (from /proc) and those it has reaped. The server must be on this
// machine (pgtest's embedded cluster); otherwise it reads 0.
func serverCPU(b *testing.B, e *env) func() time.Duration {
	var dir string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT current_setting('data_directory')`).Scan(&dir); err != nil {
		b.Fatal(err)
	}
	pidFile, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		b.Logf("no CPU time of the database server: %v", err)
		return func() time.Duration { return 0 }
	}
	postmaster := strings.SplitN(string(pidFile), "\n", 2)[0]
	const tick = 10 * time.Millisecond // USER_HZ 100
	// stat returns the fields of /proc/PID/stat after the command name.
	stat := func(pid string) []string {
		raw, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return nil
		}
		s := string(raw)
		return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	}
	ticks := func(f []string, from, to int) time.Duration {
		var t time.Duration
		for i := from; i <= to && i < len(f); i++ {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			t += time.Duration(n) * tick
		}
		return t
	}
	return func() time.Duration {
		// Fields after the name: state=0, ppid=1, utime=11, stime=12, cutime=13, cstime=14.
		total := ticks(stat(postmaster), 11, 14)
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			if f := stat(p.Name()); len(f) > 14 && f[1] == postmaster {
				total += ticks(f, 11, 12)
			}
		}
		return total
	}
}
