package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	outbound "github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/internal/fault"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// countingVendor is the demo vendor (pays each key once) with a count of
// requests and of requests in flight at once, optionally slow.
type countingVendor struct {
	v        outbound.Vendor
	slow     time.Duration
	mu       sync.Mutex
	requests int
	inflight int
	maxIn    int
}

func (c *countingVendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.requests++
	c.inflight++
	c.maxIn = max(c.maxIn, c.inflight)
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.inflight--; c.mu.Unlock() }()
	if c.slow > 0 {
		// A slow vendor: the time must really pass, so that requests
		// overlap and a crash finds some in flight.
		time.Sleep(c.slow)
	}
	c.v.ServeHTTP(w, r)
}

// dispatchFixture gives partner p the records of payrollFile(tag, n) and target vendor.
func dispatchFixture(t *testing.T, st *records.Store, p string, n int) {
	t.Helper()
	addPartners(t, st, p)
	tgt := "vendor"
	if err := st.UpdatePartner(context.Background(), p, records.PartnerUpdate{Target: &tgt}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), p+".csv")
	if err := os.WriteFile(path, payrollFile("D", n), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := intake.New(st, nil).IngestFile(context.Background(), p, path, "test"); err != nil {
		t.Fatal(err)
	}
}

// dueKeys computes the line keys of a partner's current record versions.
func dueKeys(t *testing.T, st *records.Store, p string) map[string]bool {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(), `SELECT coalesce(e.employee_id, derived_employee_id(r.partner_id, r.employee_ref)),
			r.pay_period, r.component, r.version
		FROM records r LEFT JOIN employees e USING (partner_id, employee_ref) WHERE r.partner_id = $1`, p)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]bool{}
	for rows.Next() {
		var emp, pp, comp string
		var v int
		if err := rows.Scan(&emp, &pp, &comp, &v); err != nil {
			t.Fatal(err)
		}
		m[outbound.LineKey(p, emp, pp, comp, v)] = true
	}
	return m
}

func waitDispatched(t *testing.T, st *records.Store, p string, within time.Duration) {
	t.Helper()
	eventually.NoError(t, within, func() error {
		var open, all int
		if err := st.Pool().QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state = 'in_progress'), count(*)
			FROM dispatch_runs WHERE partner_id = $1`, p).Scan(&open, &all); err != nil {
			t.Fatal(err)
		}
		if all == 0 || open > 0 {
			return fmt.Errorf("partner %s: %d of %d runs still in progress", p, open, all)
		}
		return nil
	})
}

// TestCrashDispatch SIGKILLs the dispatching serve before a chunk is sent,
// after it is sent and before its answer is recorded, and mid-way through
// recording; a restarted serve resumes the run. Every due line is paid
// exactly once by its key, none is skipped, none is paid under another key.
func TestCrashDispatch(t *testing.T) {
	url := pgtest.New(t)
	st := openTestStore(t, url)
	cv := &countingVendor{}
	vendor := httptest.NewServer(cv)
	defer vendor.Close()
	if err := outbound.NewStore(st.Pool()).AddTarget(context.Background(), outbound.Target{Name: "vendor", URL: vendor.URL,
		ChunkSize: 100, MaxAttempts: 5, RetryBase: 10 * time.Millisecond, Timeout: 5 * time.Second, LineStatus: true}); err != nil {
		t.Fatal(err)
	}
	const lines, runs = 450, 2
	dataDir := t.TempDir()
	var crashes, skipped, paidTwice, redelivered, total int
	start := time.Now()
	for _, stage := range []string{fault.DispatchBeforeSend, fault.DispatchAfterSend, fault.DispatchMidRecord} {
		for run := range runs {
			p := fmt.Sprintf("d-%s-%d", stage, run)
			dispatchFixture(t, st, p, lines)
			srv := startServer(t, url, dataDir, []string{"PAYINTAKE_FAULT=" + stage}, "--workers", "1")
			if _, err := st.LockPeriod(context.Background(), p, "2026-11", records.LockApproved, "test"); err != nil {
				t.Fatal(err)
			}
			srv.waitKilled(time.Minute)
			crashes++
			srv = startServer(t, url, dataDir, nil, "--workers", "1")
			waitDispatched(t, st, p, time.Minute)
			srv.stop()
			want := dueKeys(t, st, p)
			paid := cv.v.Paid()
			for k := range want {
				total++
				switch n := paid[k]; {
				case n == 0:
					skipped++
					t.Errorf("%s run %d: line %s never paid", stage, run, k)
				case n > 1:
					redelivered++ // sent again under its key; the vendor paid it once
				}
			}
			var ok int
			if err := st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM dispatch_due d JOIN dispatch_runs r ON r.id = d.run_id
				WHERE r.partner_id = $1 AND d.state = 'succeeded'`, p).Scan(&ok); err != nil {
				t.Fatal(err)
			}
			if ok != lines {
				t.Errorf("%s run %d: %d lines recorded as succeeded, want %d", stage, run, ok, lines)
			}
		}
	}
	// A key the vendor paid that is no due line version would be a line paid twice.
	all := map[string]bool{}
	rows, err := st.Pool().Query(context.Background(), `SELECT id FROM partners`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		for k := range dueKeys(t, st, id) {
			all[k] = true
		}
	}
	for k := range cv.v.Paid() {
		if !all[k] {
			paidTwice++
			t.Errorf("the vendor paid key %s, which is no due line", k)
		}
	}
	t.Logf("SUMMARY dispatch crash: SIGKILL at 3 stages x %d runs = %d crashes in %v: %d lines, %d requests, %d lines sent again under their key after a crash (paid once), %d skipped, %d paid twice",
		runs, crashes, time.Since(start).Round(time.Second), total, cv.requests, redelivered, skipped, paidTwice)
}

// TestTwoServesOnePeriod: two serve processes on one database; a period's
// chunks are never in flight at once.
func TestTwoServesOnePeriod(t *testing.T) {
	url := pgtest.New(t)
	st := openTestStore(t, url)
	cv := &countingVendor{slow: 30 * time.Millisecond}
	vendor := httptest.NewServer(cv)
	defer vendor.Close()
	if err := outbound.NewStore(st.Pool()).AddTarget(context.Background(), outbound.Target{Name: "vendor", URL: vendor.URL,
		ChunkSize: 20, MaxAttempts: 5, RetryBase: 10 * time.Millisecond, Timeout: 5 * time.Second, LineStatus: true}); err != nil {
		t.Fatal(err)
	}
	dispatchFixture(t, st, "two", 600)
	a := startServer(t, url, t.TempDir(), nil, "--workers", "2")
	b := startServer(t, url, t.TempDir(), nil, "--workers", "2")
	if _, err := st.LockPeriod(context.Background(), "two", "2026-11", records.LockApproved, "test"); err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, st, "two", time.Minute)
	a.stop()
	b.stop()
	want := dueKeys(t, st, "two")
	paid := cv.v.Paid()
	for k := range want {
		if paid[k] != 1 {
			t.Errorf("line %s delivered %d times, want 1", k, paid[k])
		}
	}
	t.Logf("two serves: %d requests for %d lines, at most %d in flight at once", cv.requests, len(want), cv.maxIn)
	if cv.maxIn != 1 || cv.requests != 30 {
		t.Errorf("%d requests, %d in flight at once: want 30 requests, one at a time", cv.requests, cv.maxIn)
	}
}
