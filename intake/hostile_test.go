package intake_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/bench"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// oneKeyFile is a file of rows rows that all repeat one natural key.
func oneKeyFile(rows int) string {
	var b strings.Builder
	b.WriteString("employee_ref,pay_period,component,amount,currency\n")
	for i := 0; i < rows; i++ {
		fmt.Fprintf(&b, "E1,2026-11,BASE,%d.00,USD\n", 100+i%1000)
	}
	return b.String()
}

// A key repeated in every row of a file costs what a file of distinct keys
// costs: each row's message names the group's first lines and its size,
// never every line of the group. Before, 10,000 such rows made a 591 MB
// result in 37 s.
func TestHostileOneRepeatedKeyIsLinear(t *testing.T) {
	f := newFixture(t, records.Partner{})
	sizes := map[int]int64{}
	for _, n := range []int{10, 10000, 100000} {
		start := time.Now()
		_, out := f.ingest(fmt.Sprintf("dup-%d.csv", n), oneKeyFile(n))
		if out.Counts["rejected"] != n {
			t.Fatalf("%d rows: counts %v, want all rejected", n, out.Counts)
		}
		sizes[n] = out.ResultSize
		t.Logf("SUMMARY one key × %d rows: result %d bytes (%.0f bytes/row) in %v", n, out.ResultSize,
			float64(out.ResultSize)/float64(n), time.Since(start).Round(time.Millisecond))
	}
	// The message of a group over five rows is the same for every row, so
	// the result grows with the rows, not their square.
	if per10k, per100k := float64(sizes[10000])/1e4, float64(sizes[100000])/1e5; per100k > 1.1*per10k || per100k > 400 {
		t.Errorf("result bytes per row: %.0f at 10k rows, %.0f at 100k: not linear", per10k, per100k)
	}
	rows := f.resultRows(records.Envelope{ID: int64(f.count(`SELECT max(id) FROM envelopes`))})
	msg := rows[0]["message"]
	if !strings.Contains(msg, "appears 100000 times") || !strings.Contains(msg, "lines 2, 3, 4, 5, 6, …") {
		t.Errorf("message of a 100,000-row group: %q", msg)
	}
	// A small group still names each of its lines.
	_, out := f.ingest("small-group.csv", "employee_ref,pay_period,component,amount,currency\n"+
		"E1,2026-11,BASE,1.00,USD\nE2,2026-11,BASE,1.00,USD\nE1,2026-11,BASE,2.00,USD\n")
	rows = f.resultRows(out)
	if m := rows[0]["message"]; !strings.Contains(m, "appears on lines 2, 4 of this file") {
		t.Errorf("message of a 2-row group: %q", m)
	}
}

// BenchmarkOneKeyVersusDistinct processes a 100,000-row file whose rows all
// repeat one key beside a normal 100,000-row file of distinct keys:
// go test -run XXX -bench OneKeyVersusDistinct ./intake/
func BenchmarkOneKeyVersusDistinct(b *testing.B) {
	st := pgtest.Store(b)
	in := intake.New(st, nil)
	ctx := context.Background()
	dir := b.TempDir()
	const rows = 100000
	files := map[string]func(i int) string{
		"distinct": func(i int) string {
			var sb strings.Builder
			if _, err := (bench.File{Rows: rows, Offset: i * (rows + 1)}).WriteTo(&sb); err != nil {
				b.Fatal(err)
			}
			return sb.String()
		},
		"one-key": func(int) string { return oneKeyFile(rows) },
	}
	for _, name := range []string{"distinct", "one-key"} {
		b.Run(name, func(b *testing.B) {
			partner := "bench-" + name
			if err := st.AddPartner(ctx, records.Partner{ID: partner}); err != nil {
				b.Fatal(err)
			}
			i := 0
			var size int64
			for b.Loop() {
				b.StopTimer()
				path := filepath.Join(dir, fmt.Sprintf("%s-%d.csv", name, i))
				if err := os.WriteFile(path, []byte(files[name](i)), 0o644); err != nil {
					b.Fatal(err)
				}
				i++
				b.StartTimer()
				_, out, err := in.IngestFile(ctx, partner, path, "bench")
				if err != nil || out.Counts["created"]+out.Counts["rejected"] != rows {
					b.Fatalf("ingest: %v %v", out.Counts, err)
				}
				size = out.ResultSize
			}
			b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(size), "result-bytes")
		})
	}
}

// gauge reads one metric of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// A file whose processor dies every time (killed, out of memory) is not
// queued again in a loop: each requeue by the orphan sweep waits twice as
// long as the one before, and after MaxRequeues the envelope is left for an
// operator and counted in payintake_envelopes_stuck. A job's own retries
// are spaced out the same way.
func TestHostileFailingFileIsNotRetriedInALoop(t *testing.T) {
	f := newFixture(t, records.Partner{})
	path := filepath.Join(f.dir, "killer.csv")
	if err := os.WriteFile(path, []byte(oneKeyFile(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := f.store.Receive(f.ctx, records.Incoming{PartnerID: f.partner, FileName: "killer.csv", Source: "test", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := intake.MigrateQueue(f.ctx, f.store.Pool()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	q, err := intake.NewQueue(f.in, intake.NewMetrics(reg), intake.QueueConfig{Workers: 0})
	if err != nil {
		t.Fatal(err)
	}
	pool := f.store.Pool()
	rc := f.riverClient()
	const after = time.Millisecond
	requeues, sweeps := 0, 0
	for sweeps < 3*intake.MaxRequeues {
		sweeps++
		n, err := q.RequeueOrphans(f.ctx, pool, after)
		if err != nil {
			t.Fatal(err)
		}
		requeues += n
		if n == 0 {
			continue
		}
		// Right after a requeue the next sweep leaves the envelope alone:
		// its backoff has not passed.
		if again, err := q.RequeueOrphans(f.ctx, pool, after); err != nil || again != 0 {
			t.Fatalf("sweep right after a requeue queued %d again (%v)", again, err)
		}
		// The job's process "dies": the job is gone, the envelope still
		// received; the backoff is made to pass.
		job := f.processJobs()[env.ID]
		if job == nil {
			t.Fatalf("sweep %d: envelope %d was requeued without a job", sweeps, env.ID)
		}
		if _, err := rc.JobDelete(f.ctx, job.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(f.ctx, `UPDATE envelope_attempts SET last_requeued_at = now() - interval '1 day' WHERE envelope_id = $1`, env.ID); err != nil {
			t.Fatal(err)
		}
	}
	stuck := gauge(t, reg, "payintake_envelopes_stuck")
	t.Logf("SUMMARY envelope whose processor dies every time: queued again %d times in %d sweeps, then left for an operator (payintake_envelopes_stuck %v); job retries after %v, %v, %v, … %v",
		requeues, sweeps, stuck, intake.RetryDelay(1), intake.RetryDelay(2), intake.RetryDelay(3), intake.RetryDelay(10))
	if requeues != intake.MaxRequeues || stuck != 1 {
		t.Errorf("requeued %d times (want %d), stuck gauge %v (want 1)", requeues, intake.MaxRequeues, stuck)
	}
	for a, want := range map[int]time.Duration{1: 2 * time.Second, 2: 8 * time.Second, 3: 32 * time.Second, 7: time.Hour, 10: time.Hour} {
		if got := intake.RetryDelay(a); got != want {
			t.Errorf("retry after attempt %d: %v, want %v", a, got, want)
		}
	}
	// A failure is recorded for operators.
	if err := f.store.RecordFailure(f.ctx, env.ID, fmt.Errorf("canceling statement due to user request")); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT failures FROM envelope_attempts WHERE envelope_id = $1 AND last_error LIKE 'canceling%'`, env.ID); n != 1 {
		t.Errorf("failures recorded: %d, want 1", n)
	}
}

// queueFixture runs a queue with workers on a fresh database with partners.
func queueFixture(t *testing.T, workers int, partners ...string) (*fixture, *intake.Queue) {
	t.Helper()
	f := newFixture(t, records.Partner{ID: partners[0]})
	for _, p := range partners[1:] {
		if err := f.store.AddPartner(f.ctx, records.Partner{ID: p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := intake.MigrateQueue(f.ctx, f.store.Pool()); err != nil {
		t.Fatal(err)
	}
	q, err := intake.NewQueue(f.in, nil, intake.QueueConfig{Workers: workers, TestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := q.Stop(ctx); err != nil {
			t.Errorf("stop queue: %v", err)
		}
	})
	return f, q
}

// receive records content as file name of partner and enqueues its processing.
func (f *fixture) receive(q *intake.Queue, partner, name, content string) records.Envelope {
	f.t.Helper()
	path := filepath.Join(f.dir, partner+"-"+name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	env, err := f.store.Receive(f.ctx, records.Incoming{PartnerID: partner, FileName: name, Source: "test", Path: path}, q.Enqueue)
	if err != nil {
		f.t.Fatal(err)
	}
	return env
}

func (f *fixture) waitDone(id int64, within time.Duration) (records.Envelope, time.Time) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, within)
	defer cancel()
	env, err := f.store.WaitDone(ctx, id, 5*time.Millisecond)
	if err != nil {
		f.t.Fatalf("envelope %d not processed within %v: %v", id, within, err)
	}
	return env, time.Now()
}

const smallFile = "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,75.00,USD\n"

// While partner A's lock is held (a long file, a bulk decision) and four
// of its files wait, partner B's file is processed at once: no worker sits
// behind A's lock. Before, all four workers waited on A and B waited for
// as long as A held its lock.
func TestHostileBusyPartnerDoesNotHoldWorkers(t *testing.T) {
	f, q := queueFixture(t, 4, "a", "b")
	// Hold A's lock as a processing transaction would.
	conn, err := f.store.Pool().Acquire(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(f.ctx, `SELECT pg_advisory_lock(7310, hashtext('a'))`); err != nil {
		t.Fatal(err)
	}
	var as []records.Envelope
	for i := range 4 {
		as = append(as, f.receive(q, "a", fmt.Sprintf("a%d.csv", i), smallFile))
	}
	start := time.Now()
	b := f.receive(q, "b", "b.csv", smallFile)
	f.waitDone(b.ID, time.Minute) // never, if the workers wait on A's lock
	bLatency := time.Since(start)
	for _, a := range as {
		if env, err := f.store.Envelope(f.ctx, a.ID); err != nil || env.Status != records.StatusReceived {
			t.Fatalf("a file of A was processed while A's lock was held: %v %v", env.Status, err)
		}
	}
	if _, err := conn.Exec(f.ctx, `SELECT pg_advisory_unlock(7310, hashtext('a'))`); err != nil {
		t.Fatal(err)
	}
	release := time.Now()
	for _, a := range as {
		f.waitDone(a.ID, time.Minute)
	}
	t.Logf("SUMMARY partner A's lock held with 4 of its files queued, 4 workers: B's file done in %v; A's 4 files done %v after A's lock was released",
		bLatency.Round(time.Millisecond), time.Since(release).Round(time.Millisecond))
}

// Four heavy files of partner A and one small file of partner B, 4
// workers: B's result arrives before A's first heavy file is done, so B
// waits for its own processing, not for A's.
func TestHostileFairnessHeavyPartner(t *testing.T) {
	f, q := queueFixture(t, 4, "a", "b")
	heavy := oneKeyFile(40000)
	var as []records.Envelope
	for i := range 4 {
		as = append(as, f.receive(q, "a", fmt.Sprintf("heavy%d.csv", i), heavy))
	}
	start := time.Now()
	b := f.receive(q, "b", "b.csv", smallFile)
	_, bDone := f.waitDone(b.ID, 2*time.Minute)
	var aFirst time.Time
	for _, a := range as {
		_, done := f.waitDone(a.ID, 2*time.Minute)
		if aFirst.IsZero() || done.Before(aFirst) {
			aFirst = done
		}
	}
	var aProc []float64
	rows, err := f.store.Pool().Query(f.ctx, `SELECT extract(epoch FROM processed_at - received_at) FROM envelopes WHERE partner_id = 'a' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s float64
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		aProc = append(aProc, s)
	}
	t.Logf("SUMMARY 4 heavy files of A (40,000 rows each) and 1 small file of B on 4 workers: B's result after %v, A's first after %v; A's files done %.1f s after receipt",
		bDone.Sub(start).Round(time.Millisecond), aFirst.Sub(start).Round(time.Millisecond), aProc)
	if !bDone.Before(aFirst) {
		t.Errorf("B's result (%v) came after A's first heavy file (%v): B waited for A", bDone.Sub(start), aFirst.Sub(start))
	}
}
