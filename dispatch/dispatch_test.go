package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/riverqueue/river"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payintake/payintake/records"
)

func TestDispatchSendsEveryLineOnceWithExactRequests(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	e := newEnv(t, Target{ChunkSize: 200, MaxAttempts: 5, TokenFile: tokenFile})
	e.ingest("nov.csv", payroll(450, "2026-11"))
	e.lock("2026-11")
	runs := e.dispatch("2026-11")
	if len(runs) != 1 || runs[0].State != RunComplete || runs[0].Total != 450 || runs[0].Settled != 450 {
		t.Fatalf("runs = %+v, want one complete run of 450", runs)
	}
	reqs := e.v.requests()
	if len(reqs) != 3 || len(reqs[0].lines) != 200 || len(reqs[2].lines) != 50 {
		t.Fatalf("%d requests, want chunks of 200, 200, 50", len(reqs))
	}
	batch := BatchKey("acme", "2026-11", 1)
	for _, r := range reqs {
		if r.key != ChunkKey(batch, r.lines) || r.auth != "Bearer s3cret" || r.ctype != "application/json" {
			t.Errorf("request headers: key %s (want %s), auth %q, content type %q", r.key, ChunkKey(batch, r.lines), r.auth, r.ctype)
		}
	}
	e.checkPaidOnce(e.expectedKeys("2026-11"))
	// The body: field order, money as a string, no whitespace, key of the line.
	first := LineKey("acme", "emp_"+derived("acme", "E0000"), "2026-11", "BASE", 1)
	want := `{"batch_key":"` + batch + `","partner":"acme","pay_period":"2026-11","lines":[{"key":"` + first +
		`","employee_id":"emp_` + derived("acme", "E0000") + `","employee_ref":"E0000","pay_period":"2026-11","component":"BASE","version":1,"amount":"1000.00","currency":"USD"},`
	if !bytes.HasPrefix(reqs[0].body, []byte(want)) {
		t.Errorf("body starts\n%s\nwant\n%s", reqs[0].body[:min(len(reqs[0].body), len(want))], want)
	}
	st := e.status("2026-11")
	if len(st) != 1 || st[0].Succeeded != 450 || st[0].Pending != 0 || st[0].Failed != 0 || st[0].Attempts != 3 || st[0].BatchKey != batch {
		t.Errorf("status %+v", st)
	}
	// Nothing is sent again by a second dispatch.
	e.dispatch("2026-11")
	if n := len(e.v.requests()); n != 3 {
		t.Errorf("a second dispatch sent %d more requests", n-3)
	}
}

// derived is derived_employee_id's hex part, computed independently.
func derived(partner, ref string) string {
	return sha256hex(partner + ":" + ref)[:20]
}

func TestResponseTable(t *testing.T) {
	same := func(t *testing.T, reqs []vendorReq) {
		t.Helper()
		for _, r := range reqs[1:] {
			if r.key != reqs[0].key || !bytes.Equal(r.body, reqs[0].body) {
				t.Errorf("a retry is not the same bytes under the same key: %s vs %s", r.key, reqs[0].key)
			}
		}
	}
	for _, c := range []struct {
		name   string
		first  answer
		status int // wanted final line state count
	}{
		{"201", answer{status: 201}, 0},
		{"204", answer{status: 204}, 0},
		{"409", answer{status: 409}, 0},
	} {
		t.Run("ok "+c.name, func(t *testing.T) {
			e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 3})
			e.ingest("a.csv", payroll(5, "2026-11"))
			e.lock("2026-11")
			e.v.script = func(n int, r vendorReq) answer { return c.first }
			e.dispatch("2026-11")
			if n := len(e.v.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			if st := e.status("2026-11")[0]; st.Succeeded != 5 || st.State != RunComplete {
				t.Errorf("status %+v", st)
			}
		})
	}
	for _, code := range []int{408, 429, 500, 502, 503, 504, -1, -2} {
		name := map[int]string{-1: "timeout", -2: "dropped connection after paying"}[code]
		if name == "" {
			name = http.StatusText(code)
		}
		t.Run("retry "+name, func(t *testing.T) {
			e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 5, Timeout: 300 * time.Millisecond, RetryBase: time.Second})
			e.ingest("a.csv", payroll(5, "2026-11"))
			e.lock("2026-11")
			e.v.script = func(n int, r vendorReq) answer {
				if n >= 2 {
					return answer{status: 200}
				}
				switch code {
				case -1:
					return answer{status: 200, slow: 600 * time.Millisecond, pay: func([]string) []string { return nil }}
				case -2:
					return answer{drop: true}
				}
				return answer{status: code}
			}
			e.dispatch("2026-11")
			reqs := e.v.requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3 (two retries)", len(reqs))
			}
			same(t, reqs)
			e.checkPaidOnce(e.expectedKeys("2026-11"))
			for i, d := range e.delays {
				nominal := time.Second << i
				if d < nominal*8/10 || d > nominal*12/10 {
					t.Errorf("delay %d = %v, want %v ±20%%", i+1, d, nominal)
				}
			}
			if len(e.delays) != 2 {
				t.Errorf("%d delays, want 2", len(e.delays))
			}
			if st := e.status("2026-11")[0]; st.Succeeded != 5 || st.Attempts != 3 {
				t.Errorf("status %+v", st)
			}
		})
	}
	t.Run("429 Retry-After seconds and date", func(t *testing.T) {
		e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 5})
		e.ingest("a.csv", payroll(3, "2026-11"))
		e.lock("2026-11")
		e.v.script = func(n int, r vendorReq) answer {
			switch n {
			case 0:
				return answer{status: 429, header: map[string]string{"Retry-After": "3"}}
			case 1:
				return answer{status: 429, header: map[string]string{"Retry-After": time.Now().Add(20 * time.Second).UTC().Format(http.TimeFormat)}}
			}
			return answer{status: 200}
		}
		e.dispatch("2026-11")
		same(t, e.v.requests())
		if len(e.delays) != 2 || e.delays[0] < 3*time.Second || e.delays[0] > 3300*time.Millisecond ||
			e.delays[1] < 18*time.Second || e.delays[1] > 22*time.Second {
			t.Errorf("delays %v, want [3s, 3.3s] then about 19-20s up to +10%%", e.delays)
		}
	})
	for _, code := range []int{400, 401, 404, 422} {
		t.Run("dead letter "+http.StatusText(code), func(t *testing.T) {
			e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 5})
			e.ingest("a.csv", payroll(4, "2026-11"))
			e.lock("2026-11")
			e.v.script = func(n int, r vendorReq) answer { return answer{status: code, body: `{"error":"bad batch"}`} }
			e.dispatch("2026-11")
			if n := len(e.v.requests()); n != 1 {
				t.Errorf("%d requests, want 1 (no retry)", n)
			}
			st := e.status("2026-11")[0]
			if st.Failed != 4 || st.State != RunComplete || len(st.DeadLetters) != 4 {
				t.Fatalf("status %+v", st)
			}
			if dl := st.DeadLetters[0]; dl.Status != code || dl.Detail != `{"error":"bad batch"}` || dl.EmployeeRef != "E0000" || dl.Version != 1 {
				t.Errorf("dead letter %+v", dl)
			}
		})
	}
	t.Run("retries exhausted", func(t *testing.T) {
		e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 3})
		e.ingest("a.csv", payroll(2, "2026-11"))
		e.lock("2026-11")
		e.v.script = func(n int, r vendorReq) answer { return answer{status: 503} }
		e.dispatch("2026-11")
		if n := len(e.v.requests()); n != 3 {
			t.Errorf("%d requests, want 3 (--max-attempts)", n)
		}
		st := e.status("2026-11")[0]
		if st.Failed != 2 || !strings.HasPrefix(st.DeadLetters[0].Detail, "retries_exhausted") || st.DeadLetters[0].Status != 503 {
			t.Errorf("status %+v", st)
		}
		// dispatch retry sends them again under the same keys.
		e.v.script = nil
		n, err := e.d.Store().Retry(e.ctx, "acme", "2026-11")
		if err != nil || n != 2 {
			t.Fatalf("retry: %d, %v", n, err)
		}
		e.dispatch("2026-11")
		reqs := e.v.requests()
		if len(reqs) != 4 || reqs[3].key != reqs[0].key || !bytes.Equal(reqs[3].body, reqs[0].body) {
			t.Errorf("retry: %d requests, the last must be the same bytes under the same key", len(reqs))
		}
		e.checkPaidOnce(e.expectedKeys("2026-11"))
	})
	t.Run("207 mixed and missing lines", func(t *testing.T) {
		e := newEnv(t, Target{ChunkSize: 7, MaxAttempts: 5})
		e.ingest("a.csv", payroll(7, "2026-11"))
		e.lock("2026-11")
		e.v.script = func(n int, r vendorReq) answer {
			if n > 0 {
				return answer{status: 200}
			}
			return answer{status: 207, results: func(keys []string) []map[string]any {
				// 0 ok, 1 409 (already), 2 503 (retry), 3 422 (dead), 4 missing, 5 201 ok,
				// 6 302 (a redirect is never a payment: dead)
				return []map[string]any{
					{"key": keys[0], "status": 200, "detail": "paid"},
					{"key": keys[1], "status": 409, "detail": "already paid"},
					{"key": keys[2], "status": 503, "detail": "busy"},
					{"key": keys[3], "status": 422, "detail": "unknown employee"},
					{"key": keys[5], "status": 201, "detail": "paid"},
					{"key": keys[6], "status": 302, "detail": "moved"},
				}
			}}
		}
		e.dispatch("2026-11")
		reqs := e.v.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests, want 2", len(reqs))
		}
		if want := []string{reqs[0].lines[2], reqs[0].lines[4]}; strings.Join(reqs[1].lines, ",") != strings.Join(want, ",") {
			t.Errorf("second chunk %v, want the retried and missing lines %v", reqs[1].lines, want)
		}
		if reqs[1].key == reqs[0].key || reqs[1].key != ChunkKey(BatchKey("acme", "2026-11", 1), reqs[1].lines) {
			t.Errorf("the later chunk needs its own key")
		}
		st := e.status("2026-11")[0]
		dead := map[int]string{}
		for _, d := range st.DeadLetters {
			dead[d.Status] = d.Detail
		}
		if st.Succeeded != 5 || st.Failed != 2 || dead[422] != "unknown employee" || dead[302] != "moved" {
			t.Errorf("status %+v", st)
		}
	})
}

func TestApprovalAndRelock(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 50, MaxAttempts: 3})
	e.ingest("a.csv", payroll(3, "2026-11"))
	e.lock("2026-11")
	e.dispatch("2026-11")
	v1 := e.expectedKeys("2026-11")
	// A held change approved in the dispatched period: the new version is due.
	e.ingest("b.csv", csvHeader+"E0001,2026-11,BASE,5000.00,USD\n")
	xs, err := e.store.Exceptions(e.ctx, records.ExceptionFilter{Partner: "acme", Status: "open"})
	if err != nil || len(xs) != 1 {
		t.Fatalf("exceptions %v %v", xs, err)
	}
	if _, err := e.store.Decide(e.ctx, records.Decision{ExceptionID: xs[0].ID, Approve: true, Reviewer: "rev"}); err != nil {
		t.Fatal(err)
	}
	st := e.status("2026-11")
	if st[0].State != RunInProgress || st[0].Total != 4 || st[0].Pending != 1 {
		t.Fatalf("after the approval: %+v", st)
	}
	e.dispatch("2026-11")
	reqs := e.v.requests()
	newKey := LineKey("acme", "emp_"+derived("acme", "E0001"), "2026-11", "BASE", 2)
	if len(reqs) != 2 || len(reqs[1].lines) != 1 || reqs[1].lines[0] != newKey {
		t.Fatalf("after the approval: requests %+v, want one with only %s", len(reqs), newKey)
	}
	// Unlock, change, relock: run 2 sends only versions not yet settled.
	if _, err := e.store.UnlockPeriod(e.ctx, "acme", "2026-11", "lead", "correction"); err != nil {
		t.Fatal(err)
	}
	e.ingest("c.csv", csvHeader+"E0002,2026-11,BASE,7000.00,USD\nE0009,2026-11,BASE,10.00,USD\n")
	e.lock("2026-11")
	runs := e.dispatch("2026-11")
	if len(runs) != 1 || runs[0].Number != 2 || runs[0].BatchKey() != BatchKey("acme", "2026-11", 2) || runs[0].Total != 2 {
		t.Fatalf("relock: runs %+v, want run 2 with 2 lines", runs)
	}
	reqs = e.v.requests()
	if len(reqs) != 3 || len(reqs[2].lines) != 2 || !strings.Contains(string(reqs[2].body), BatchKey("acme", "2026-11", 2)) {
		t.Fatalf("run 2 sent %d requests", len(reqs)-2)
	}
	all := e.expectedKeys("2026-11")
	for k := range v1 {
		all[k] = true
	}
	all[newKey] = true
	e.checkPaidOnce(all)
	for k, n := range e.v.paidKeys() {
		if n != 1 {
			t.Errorf("key %s delivered %d times", k, n)
		}
	}
}

// TestRelockLeavesSettledVersionsOut: run 2 of a period leaves out the
// versions run 1 settled, dead letters included (they are settled as
// failed; `dispatch retry` is how they are sent again).
func TestRelockLeavesSettledVersionsOut(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 50, MaxAttempts: 3})
	e.ingest("a.csv", payroll(3, "2026-11"))
	e.v.script = func(n int, r vendorReq) answer {
		return answer{status: 207, results: func(keys []string) []map[string]any {
			var res []map[string]any
			for i, k := range keys {
				st := 200
				if i == 0 {
					st = 422
				}
				res = append(res, map[string]any{"key": k, "status": st, "detail": "x"})
			}
			return res
		}}
	}
	e.lock("2026-11")
	e.dispatch("2026-11")
	if st := e.status("2026-11")[0]; st.Succeeded != 2 || st.Failed != 1 {
		t.Fatalf("run 1: %+v, want 2 succeeded and 1 dead letter", st)
	}
	if _, err := e.store.UnlockPeriod(e.ctx, "acme", "2026-11", "lead", "check"); err != nil {
		t.Fatal(err)
	}
	e.ingest("b.csv", csvHeader+"E0009,2026-11,BASE,10.00,USD\n")
	e.lock("2026-11")
	runs := e.dispatch("2026-11")
	if len(runs) != 1 || runs[0].Number != 2 || runs[0].Total != 1 {
		t.Fatalf("relock: runs %+v, want run 2 with only the new line", runs)
	}
	reqs := e.v.requests()
	if len(reqs) != 2 || len(reqs[1].lines) != 1 || reqs[1].lines[0] != LineKey("acme", "emp_"+derived("acme", "E0009"), "2026-11", "BASE", 1) {
		t.Fatalf("%d requests, want the first and one with only E0009's line", len(reqs))
	}
}

func TestRequestHashConflictIsNotSent(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 50, MaxAttempts: 3})
	e.ingest("a.csv", payroll(3, "2026-11"))
	key := LineKey("acme", "emp_"+derived("acme", "E0001"), "2026-11", "BASE", 1)
	// The key already holds another line (as a bug would leave it).
	if _, err := e.store.Pool().Exec(e.ctx, `INSERT INTO dispatch_ledger (key, request_hash, partner_id, pay_period,
		employee_id, employee_ref, component, version, record_id, line)
		SELECT $1, sha256('other'), 'acme', '2026-11', 'x', 'E0001', 'BASE', 1, id, 'other' FROM records LIMIT 1`, key); err != nil {
		t.Fatal(err)
	}
	e.lock("2026-11")
	e.dispatch("2026-11")
	for _, r := range e.v.requests() {
		for _, l := range r.lines {
			if l == key {
				t.Fatal("the conflicting key was sent")
			}
		}
	}
	st := e.status("2026-11")[0]
	if st.Conflicts != 1 || st.Succeeded != 2 || st.State != RunComplete || len(st.DeadLetters) != 1 ||
		st.DeadLetters[0].Key != key || !strings.HasPrefix(st.DeadLetters[0].Detail, "request_hash_conflict") {
		t.Errorf("status %+v", st)
	}
	// Logged at error level with both hashes.
	logs := e.logged("dispatch: request-hash conflict, line not sent (a bug: the same key would carry other content)")
	if len(logs) != 1 || logs[0]["level"] != "ERROR" || logs[0]["key"] != key || logs[0]["stored_hash"] != sha256hex("other") {
		t.Errorf("conflict log lines %v, want one at ERROR for %s", logs, key)
	}
	// dispatch retry does not send it either: it stays a bug to fix.
	sent := len(e.v.requests())
	if n, err := e.d.Store().Retry(e.ctx, "acme", "2026-11"); err != nil || n != 0 {
		t.Errorf("retry put back %d line(s) (%v), want none", n, err)
	}
	e.dispatch("2026-11")
	if n := len(e.v.requests()); n != sent {
		t.Errorf("after dispatch retry, %d more request(s)", n-sent)
	}
}

// TestArchiveJobRunsOnTheDispatcherClock: the daily job archives by the
// dispatcher's clock, so moving that clock past 90 days archives the settled
// rows and nothing is waited for.
func TestArchiveJobRunsOnTheDispatcherClock(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 50, MaxAttempts: 3})
	e.ingest("a.csv", payroll(2, "2026-11"))
	e.lock("2026-11")
	e.dispatch("2026-11")
	start := time.Now()
	count := func() (ledger, archive int) {
		t.Helper()
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT (SELECT count(*) FROM dispatch_ledger), (SELECT count(*) FROM dispatch_ledger_archive)`).Scan(&ledger, &archive); err != nil {
			t.Fatal(err)
		}
		return ledger, archive
	}
	w := &archiveWorker{d: e.d}
	for _, c := range []struct {
		days                  int
		wantLedger, wantArchv int
	}{{0, 2, 0}, {89, 2, 0}, {91, 0, 2}} {
		e.d.cfg.Now = func() time.Time { return start.Add(time.Duration(c.days) * 24 * time.Hour) }
		if err := w.Work(e.ctx, &river.Job[ArchiveArgs]{}); err != nil {
			t.Fatalf("archive job at +%d days: %v", c.days, err)
		}
		if l, a := count(); l != c.wantLedger || a != c.wantArchv {
			t.Errorf("after the job at +%d days: ledger %d archive %d, want %d and %d", c.days, l, a, c.wantLedger, c.wantArchv)
		}
	}
}

func TestArchiveAfter90Days(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 50, MaxAttempts: 3})
	e.ingest("a.csv", payroll(3, "2026-11"))
	e.lock("2026-11")
	e.dispatch("2026-11")
	st := e.d.Store()
	now := time.Now()
	if n, err := st.Archive(e.ctx, now.Add(89*24*time.Hour)); err != nil || n != 0 {
		t.Fatalf("archive at 89 days: %d, %v", n, err)
	}
	if n, err := st.Archive(e.ctx, now.Add(91*24*time.Hour)); err != nil || n != 3 {
		t.Fatalf("archive at 91 days: %d, %v", n, err)
	}
	var ledger, archive int
	e.store.Pool().QueryRow(e.ctx, `SELECT (SELECT count(*) FROM dispatch_ledger), (SELECT count(*) FROM dispatch_ledger_archive)`).Scan(&ledger, &archive)
	if ledger != 0 || archive != 3 {
		t.Errorf("ledger %d archive %d, want 0 and 3", ledger, archive)
	}
	// An archived key is never sent again: unlock and relock.
	if _, err := e.store.UnlockPeriod(e.ctx, "acme", "2026-11", "lead", "check"); err != nil {
		t.Fatal(err)
	}
	e.lock("2026-11")
	e.dispatch("2026-11")
	if n := len(e.v.requests()); n != 1 {
		t.Errorf("%d requests, want only the first", n)
	}
}

// TestArchivedKeyInAPageIsNotSent: a page of due lines whose keys are
// partly in the archive (and no longer in the ledger, so the page's COPY
// succeeds) is taken again with a look-up: the archived keys are copied
// back settled and not sent, the others are sent.
func TestArchivedKeyInAPageIsNotSent(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 50, MaxAttempts: 3})
	e.ingest("a.csv", payroll(3, "2026-11"))
	e.lock("2026-11")
	e.dispatch("2026-11")
	if n, err := e.d.Store().Archive(e.ctx, time.Now().Add(91*24*time.Hour)); err != nil || n != 3 {
		t.Fatalf("archive at 91 days: %d, %v", n, err)
	}
	// The run's lines pending again (as if never recorded), and one key
	// gone from the archive too: that one is new to the ledger.
	var fresh string
	if err := e.store.Pool().QueryRow(e.ctx, `DELETE FROM dispatch_ledger_archive
		WHERE key = (SELECT min(key) FROM dispatch_ledger_archive) RETURNING key`).Scan(&fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Pool().Exec(e.ctx, `UPDATE dispatch_due SET state = 'pending', key = NULL;
		UPDATE dispatch_runs SET state = 'in_progress', settled = 0, completed_at = NULL`); err != nil {
		t.Fatal(err)
	}
	runs := e.dispatch("2026-11")
	if len(runs) != 1 || runs[0].State != RunComplete || runs[0].Settled != 3 {
		t.Fatalf("runs %+v, want one complete run of 3 settled lines", runs)
	}
	reqs := e.v.requests()
	if len(reqs) != 2 || len(reqs[1].lines) != 1 || reqs[1].lines[0] != fresh {
		t.Fatalf("%d requests (the last with %d lines), want the first and one with only %s", len(reqs), len(reqs[len(reqs)-1].lines), fresh)
	}
	var ledger, succeeded int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT (SELECT count(*) FROM dispatch_ledger WHERE state = 'succeeded'),
		(SELECT count(*) FROM dispatch_due WHERE state = 'succeeded')`).Scan(&ledger, &succeeded); err != nil {
		t.Fatal(err)
	}
	if ledger != 3 || succeeded != 3 {
		t.Errorf("%d ledger rows and %d due lines succeeded, want 3 and 3", ledger, succeeded)
	}
}

func TestTokenBucketAndPause(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 1, MaxAttempts: 5, RateLimit: 10})
	e.ingest("a.csv", payroll(9, "2026-11"))
	e.lock("2026-11")
	e.dispatch("2026-11")
	reqs := e.v.requests()
	elapsed := reqs[len(reqs)-1].at.Sub(reqs[0].at)
	// 80% of 10/s: 8 gaps of 125ms.
	t.Logf("token bucket: %d requests in %v at --rate-limit 10 (want at least 1s: 8/s)", len(reqs), elapsed)
	if len(reqs) != 9 || elapsed < 950*time.Millisecond {
		t.Errorf("%d requests in %v: faster than 80%% of the rate limit", len(reqs), elapsed)
	}

	p := newEnv(t, Target{ChunkSize: 1, MaxAttempts: 9})
	p.ingest("a.csv", payroll(3, "2026-11"))
	p.lock("2026-11")
	p.v.script = func(n int, r vendorReq) answer {
		if n < 3 {
			return answer{status: 429, header: map[string]string{"Retry-After": "1"}}
		}
		return answer{status: 200}
	}
	p.dispatch("2026-11")
	reqs = p.v.requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests, want 6", len(reqs))
	}
	// Requests 0-3 are the first chunk (three 429s, then paid, retried at
	// once: this test's sleep does not wait); the next chunk waits for the
	// pause: the Retry-After of the third 429.
	gap := reqs[4].at.Sub(reqs[2].at)
	t.Logf("429 pause: the next chunk went %v after the third 429 (Retry-After: 1)", gap)
	if gap < 950*time.Millisecond || reqs[3].key != reqs[0].key || reqs[4].key == reqs[0].key {
		t.Errorf("after three 429s the next chunk went after %v, want the Retry-After (1s)", gap)
	}
}

func TestOneDispatcherPerPeriod(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 5, MaxAttempts: 3})
	e.ingest("a.csv", payroll(40, "2026-11"))
	e.lock("2026-11")
	e.v.script = func(n int, r vendorReq) answer { return answer{status: 200, slow: 20 * time.Millisecond} }
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = e.d.Dispatch(e.ctx, "acme", "2026-11") })
	}
	wg.Wait()
	busy := 0
	for _, err := range errs {
		if errors.Is(err, ErrBusy) {
			busy++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if e.v.maxIn != 1 {
		t.Errorf("%d chunks of one period in flight at once, want 1", e.v.maxIn)
	}
	if n := len(e.v.requests()); n != 8 {
		t.Errorf("%d requests, want 8", n)
	}
	t.Logf("%d of 4 concurrent dispatchers found the period owned", busy)
	e.checkPaidOnce(e.expectedKeys("2026-11"))
}

var _ = json.Marshal

// TestPipelineWithPartialAnswers: many pages of few chunks, with the
// loader, the sender and the recorder overlapping, and every third answer a
// 207 that leaves two lines to retry and drops one: lines put back behind
// the loader's cursor are still sent (after the barrier), each key is paid
// exactly once, and the run completes with every line succeeded.
func TestPipelineWithPartialAnswers(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 5})
	e.ingest("a.csv", payroll(300, "2026-11"))
	e.lock("2026-11")
	e.v.script = func(n int, r vendorReq) answer {
		if n%3 != 1 || len(r.lines) < 4 {
			return answer{status: 200}
		}
		return answer{status: 207, results: func(keys []string) []map[string]any {
			var res []map[string]any
			for i, k := range keys[:len(keys)-1] { // the last line is missing from the answer
				st := 200
				if i < 2 {
					st = 503
				}
				res = append(res, map[string]any{"key": k, "status": st, "detail": "x"})
			}
			return res
		}}
	}
	d := New(e.store.Pool(), Config{ChunksPerPage: 2, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	runs, err := d.Dispatch(e.ctx, "acme", "2026-11")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].State != RunComplete || runs[0].Settled != 300 {
		t.Fatalf("runs %+v, want one complete run of 300 settled lines", runs)
	}
	partial := 0
	for i, r := range e.v.requests() {
		if i%3 == 1 && len(r.lines) >= 4 {
			partial++
		}
	}
	if partial < 10 {
		t.Fatalf("only %d partial answers: the test does not test the pipeline", partial)
	}
	e.checkPaidOnce(e.expectedKeys("2026-11"))
	for k, n := range e.v.paidKeys() {
		if n != 1 {
			t.Errorf("key %s paid %d times", k, n)
		}
	}
	if st := e.status("2026-11")[0]; st.Succeeded != 300 || st.Pending != 0 || st.Failed != 0 {
		t.Errorf("status %+v", st)
	}
	t.Logf("%d requests, %d of them 207", len(e.v.requests()), partial)
}
