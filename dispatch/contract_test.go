package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/records"
)

// TestLineObject: money is a JSON string at the currency's scale (2 for
// USD, 0 for JPY) whatever the file wrote; hours, rate and pay_date are
// present exactly when set.
func TestLineObject(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 3})
	e.ingest("a.csv", "employee_ref,pay_period,component,amount,currency,hours,rate,pay_date\n"+
		"E1,2026-11,BASE,4000,USD,,,\n"+
		"E2,2026-11,BASE,1500,JPY,7.5,200,2026-11-30\n")
	e.lock("2026-11")
	e.dispatch("2026-11")
	reqs := e.v.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	d := json.NewDecoder(strings.NewReader(string(reqs[0].body)))
	d.UseNumber()
	var body struct {
		Lines []map[string]any `json:"lines"`
	}
	if err := d.Decode(&body); err != nil || len(body.Lines) != 2 {
		t.Fatalf("body %s: %v", reqs[0].body, err)
	}
	byRef := map[string]map[string]any{}
	for _, l := range body.Lines {
		byRef[l["employee_ref"].(string)] = l
	}
	var hours, rate string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT hours::text, rate::text FROM records WHERE employee_ref = 'E2'`).Scan(&hours, &rate); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]map[string]any{
		"E1": {"amount": "4000.00", "currency": "USD"},
		"E2": {"amount": "1500", "currency": "JPY", "hours": hours, "rate": rate, "pay_date": "2026-11-30"},
	} {
		l := byRef[ref]
		for k, v := range want {
			if l[k] != v {
				t.Errorf("line %s: %s = %#v, want the string %q", ref, k, l[k], v)
			}
		}
		for _, k := range []string{"hours", "rate", "pay_date"} {
			if _, set := want[k]; !set && l[k] != nil {
				t.Errorf("line %s has %s = %v, but it is not set", ref, k, l[k])
			}
		}
		if _, isNum := l["version"].(json.Number); !isNum {
			t.Errorf("line %s: version %#v is not a JSON number", ref, l["version"])
		}
	}
}

// TestMultiStatusLineRetriesExhausted: a line the vendor keeps answering
// 503 inside a 207 goes in later chunks of its own until it has been sent
// --max-attempts times, then it is dead-lettered (retries_exhausted) with
// the last status; the other lines of the first chunk are paid once.
func TestMultiStatusLineRetriesExhausted(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 4, MaxAttempts: 3})
	e.ingest("a.csv", payroll(4, "2026-11"))
	e.lock("2026-11")
	stubborn := LineKey("acme", "emp_"+derived("acme", "E0002"), "2026-11", "BASE", 1)
	e.v.script = func(n int, r vendorReq) answer {
		return answer{status: 207, results: func(keys []string) []map[string]any {
			var res []map[string]any
			for _, k := range keys {
				st := 200
				if k == stubborn {
					st = 503
				}
				res = append(res, map[string]any{"key": k, "status": st, "detail": "busy"})
			}
			return res
		}}
	}
	e.dispatch("2026-11")
	reqs := e.v.requests()
	if len(reqs) != 3 || len(reqs[0].lines) != 4 {
		t.Fatalf("%d requests, want the chunk of 4 and two later chunks of the 503 line", len(reqs))
	}
	for _, r := range reqs[1:] {
		if len(r.lines) != 1 || r.lines[0] != stubborn || r.key != ChunkKey(BatchKey("acme", "2026-11", 1), r.lines) {
			t.Errorf("a later chunk %v under %s, want only %s under its own chunk key", r.lines, r.key, stubborn)
		}
	}
	st := e.status("2026-11")[0]
	if st.State != RunComplete || st.Succeeded != 3 || st.Failed != 1 || len(st.DeadLetters) != 1 {
		t.Fatalf("status %+v", st)
	}
	if dl := st.DeadLetters[0]; dl.Key != stubborn || dl.Status != 503 || !strings.HasPrefix(dl.Detail, "retries_exhausted") {
		t.Errorf("dead letter %+v, want %s, 503, retries_exhausted", dl, stubborn)
	}
	if n := e.v.paidKeys()[stubborn]; n != 0 {
		t.Errorf("the refused line was paid %d times", n)
	}
	// Dead letters are logged at error level with the key and status.
	dead := e.logged("dispatch: dead letter")
	if len(dead) != 1 || dead[0]["level"] != "ERROR" || dead[0]["key"] != stubborn || dead[0]["line_status"] != float64(503) {
		t.Errorf("dead-letter log lines %v, want one at ERROR for %s", dead, stubborn)
	}
}

// TestPauseWindow: three 429 answers pause a target only when they fall
// within 10 seconds (on the gate's clock, moved by the test), and the pause
// lasts until the last Retry-After has passed and nothing is in flight.
func TestPauseWindow(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	g := newGate(0)
	g.now = func() time.Time { return now }
	at := func(sec int) { now = time.Date(2026, 11, 30, 12, 0, sec, 0, time.UTC) }
	for _, sec := range []int{0, 6, 12} { // never three within 10 s
		at(sec)
		if g.tooMany(0) {
			t.Fatalf("paused by the 429 at +%ds: only two within 10 s", sec)
		}
	}
	at(15) // 6, 12 and 15 are within 10 s
	if !g.tooMany(2 * time.Second) {
		t.Fatal("three 429 answers within 10 s did not pause")
	}
	at(16)
	g.tooMany(5 * time.Second) // a later Retry-After extends the pause
	g.mu.Lock()
	paused, resume := g.paused, g.resumeAt
	g.mu.Unlock()
	if want := time.Date(2026, 11, 30, 12, 0, 21, 0, time.UTC); !paused || !resume.Equal(want) {
		t.Errorf("paused %v until %v, want until %v (the last Retry-After)", paused, resume, want)
	}
	// In flight: the pause holds past its Retry-After until the chunk ends.
	g.begin()
	at(30)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.acquire(ctx, true); err == nil {
		t.Error("a new chunk went out while a chunk was in flight during the pause")
	}
	g.end()
	if err := g.acquire(ctx, true); err != nil {
		t.Errorf("after the pause and with nothing in flight, a new chunk waited: %v", err)
	}
}

// TestPaidLockStartsNoRun: locking an approved, dispatched period again as
// paid opens no run and sends nothing.
func TestPaidLockStartsNoRun(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 3})
	e.ingest("a.csv", payroll(3, "2026-11"))
	e.lock("2026-11")
	e.dispatch("2026-11")
	if _, err := e.store.LockPeriod(e.ctx, "acme", "2026-11", records.LockPaid, "lead"); err != nil {
		t.Fatal(err)
	}
	if runs := e.dispatch("2026-11"); len(runs) != 0 {
		t.Errorf("the paid lock opened %d run(s)", len(runs))
	}
	if st := e.status("2026-11"); len(st) != 1 || st[0].Run != 1 || st[0].Total != 3 {
		t.Errorf("status %+v, want run 1 of 3 lines only", st)
	}
	if n := len(e.v.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestMultiStatusWithoutResults: a 207 whose body is not the results
// object leaves every line of the chunk missing from it: they are all sent
// again in a later chunk, and paid once. (That later chunk holds the very
// same lines, so SPEC's chunk key — the batch key and the chunk's line keys
// — makes its Idempotency-Key the first chunk's.)
func TestMultiStatusWithoutResults(t *testing.T) {
	e := newEnv(t, Target{ChunkSize: 3, MaxAttempts: 3})
	e.ingest("a.csv", payroll(3, "2026-11"))
	e.lock("2026-11")
	e.v.script = func(n int, r vendorReq) answer {
		if n == 0 {
			return answer{status: 207, body: "<html>busy</html>", pay: func([]string) []string { return nil }}
		}
		return answer{status: 200}
	}
	e.dispatch("2026-11")
	reqs := e.v.requests()
	if len(reqs) != 2 || strings.Join(reqs[1].lines, ",") != strings.Join(reqs[0].lines, ",") {
		t.Fatalf("%d requests, want the chunk and the same lines again", len(reqs))
	}
	if reqs[1].key != ChunkKey(BatchKey("acme", "2026-11", 1), reqs[1].lines) {
		t.Errorf("the later chunk went under %s, not its chunk key", reqs[1].key)
	}
	if len(e.delays) != 1 {
		t.Errorf("%d delays before the later chunk, want 1 (a retry waits)", len(e.delays))
	}
	if st := e.status("2026-11")[0]; st.Succeeded != 3 || st.State != RunComplete {
		t.Errorf("status %+v", st)
	}
	e.checkPaidOnce(e.expectedKeys("2026-11"))
}
