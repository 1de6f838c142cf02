package notify_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/notify"
	"github.com/payintake/payintake/records"
)

// events returns the partner's events, oldest first, as "type subject" strings.
func (f *fixture) events(partner string) []string {
	f.t.Helper()
	rows, err := f.st.Pool().Query(f.ctx, `SELECT event_type || ' ' || subject FROM notify_events WHERE partner_id = $1 ORDER BY id`, partner)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func eq(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }

// TestOneEventPerBusinessEvent: a file sent twice makes one event; a leg
// replay, and the review report once the last exception is decided, one each;
// a partner with no notify URL gets none; and the database refuses a second
// event for the same business event.
func TestOneEventPerBusinessEvent(t *testing.T) {
	f := newFixture(t)
	f.setURL("acme", "http://127.0.0.1:9/never-called")
	if err := f.st.AddPartner(f.ctx, records.Partner{ID: "quiet"}); err != nil {
		t.Fatal(err)
	}

	first := f.send("acme", "march.csv", payroll)
	again := f.send("acme", "march.csv", payroll) // the same file again: its result is the first one's
	if again.ID != first.ID {
		t.Fatalf("the repeat has its own outcome %d, want %d", again.ID, first.ID)
	}
	f.send("quiet", "march.csv", payroll)
	want := []string{"submission.processed " + itoa(int(first.ID))}
	if got := f.events("acme"); !eq(got, want) {
		t.Fatalf("after the same file twice: %v, want %v", got, want)
	}
	if got := f.events("quiet"); len(got) != 0 {
		t.Fatalf("a partner without a notify URL got %v", got)
	}

	// Row 2 was rejected (too many decimals): replay it by file, twice.
	replay := "row,employee_ref,pay_period,component,amount,currency\n2,E2,2026-03,BASE,12.34,USD\n"
	rf := f.send("acme", "march.replay.csv", replay)
	f.send("acme", "march.replay.csv", replay)
	var replayID int64
	if err := f.st.Pool().QueryRow(f.ctx, `SELECT id FROM replays WHERE of_envelope = $1`, first.ID).Scan(&replayID); err != nil {
		t.Fatal(err)
	}
	want = append(want, "replay.processed "+itoa(int(replayID)), "submission.processed "+itoa(int(rf.ID)))
	if got := f.events("acme"); !eq(got, want) {
		t.Fatalf("after a replay file sent twice: %v, want %v", got, want)
	}

	// A late file on a locked period is held; the report is written, and
	// notified, when its last exception is decided.
	if _, err := f.st.LockPeriod(f.ctx, "acme", "2026-03", records.LockPaid, "test"); err != nil {
		t.Fatal(err)
	}
	late := f.send("acme", "late.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-03,BASE,11.00,USD\nE2,2026-03,BASE,13.00,USD\n")
	if late.Counts["held"] != 2 {
		t.Fatalf("late file: %v, want 2 held", late.Counts)
	}
	want = append(want, "submission.processed "+itoa(int(late.ID)))
	rows, err := f.st.Pool().Query(f.ctx, `SELECT id FROM exceptions WHERE envelope_id = $1 ORDER BY id`, late.ID)
	if err != nil {
		t.Fatal(err)
	}
	var xs []int64
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		xs = append(xs, id)
	}
	rows.Close()
	for i, x := range xs {
		if _, err := f.st.Decide(f.ctx, records.Decision{ExceptionID: x, Approve: i == 0, Reviewer: "alice", Via: "cli"}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if got := f.events("acme"); !eq(got, want) {
				t.Fatalf("with an exception still open: %v, want %v", got, want)
			}
		}
	}
	want = append(want, "review.completed "+itoa(int(late.ID)))
	if got := f.events("acme"); !eq(got, want) {
		t.Fatalf("after the review: %v, want %v", got, want)
	}
	var payload string
	if err := f.st.Pool().QueryRow(f.ctx, `SELECT payload FROM notify_events WHERE event_type = 'review.completed'`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"approved" : 1`, `"rejected" : 1`, `"report_url" : "/v1/submissions/` + itoa(int(late.ID)) + `/review.csv"`} {
		if !strings.Contains(payload, s) {
			t.Errorf("review.completed payload %s lacks %s", payload, s)
		}
	}

	// The key is the database's: a second row for the same event is refused.
	_, err = f.st.Pool().Exec(f.ctx, `INSERT INTO notify_events (partner_id, event_type, subject, webhook_id, payload)
		VALUES ('acme', 'submission.processed', $1, 'another-id', '{}')`, first.ID)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.UniqueViolation {
		t.Fatalf("a second event for submission %d: %v, want a unique violation", first.ID, err)
	}
}

// TestEnqueuedInResultTransaction: the event is written by the statement that
// stores the result, inside its transaction: invisible to others until the
// commit, gone with a rollback, so a result without its event (or an event
// without its result) cannot be committed.
func TestEnqueuedInResultTransaction(t *testing.T) {
	f := newFixture(t)
	f.setURL("acme", "http://127.0.0.1:9/never-called")
	path := f.dir + "/april.csv"
	if err := writeFile(path, payroll); err != nil {
		t.Fatal(err)
	}
	env, err := f.st.Receive(f.ctx, records.Incoming{PartnerID: "acme", FileName: "april.csv", Source: "test", Path: path}, nil)
	if err != nil || env.Status != records.StatusReceived {
		t.Fatalf("receive: %+v %v", env, err)
	}
	if n := f.count(`SELECT count(*) FROM notify_events`); n != 0 {
		t.Fatalf("%d events before any result", n)
	}
	tx, err := f.st.Pool().Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(f.ctx, `UPDATE envelopes SET status = 'processed', counts = '{"created": 2}' WHERE id = $1`, env.ID); err != nil {
		t.Fatal(err)
	}
	var inside int
	if err := tx.QueryRow(f.ctx, `SELECT count(*) FROM notify_events WHERE subject = $1`, env.ID).Scan(&inside); err != nil {
		t.Fatal(err)
	}
	outside := f.count(`SELECT count(*) FROM notify_events`)
	if err := tx.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	if inside != 1 || outside != 0 {
		t.Fatalf("inside the result's transaction %d events, outside %d; want 1 and 0", inside, outside)
	}
	if n := f.count(`SELECT count(*) FROM notify_events`); n != 0 {
		t.Fatalf("%d events after the rollback", n)
	}
	// The real processing commits both.
	out, err := f.in.Process(f.ctx, env.ID)
	if err != nil || out.Status != records.StatusProcessed {
		t.Fatalf("process: %+v %v", out, err)
	}
	if n := f.count(`SELECT count(*) FROM notify_events e JOIN envelopes v ON v.id = e.subject
		WHERE v.status = 'processed' AND e.payload::json -> 'data' ->> 'status' = 'processed'`); n != 1 {
		t.Fatalf("%d events for the processed envelope, want 1", n)
	}
}

// scripted is a Go receiver answering with the statuses given, in order
// (the last one for every later request); it records the webhook-ids.
type scripted struct {
	mu       sync.Mutex
	statuses []int
	ids      []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, r.Header.Get("webhook-id"))
	st := s.statuses[min(len(s.ids), len(s.statuses))-1]
	w.WriteHeader(st)
}

func (s *scripted) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// TestRedeliver: an answer that is not retried fails the event at once;
// redelivery sends it again, with the same webhook-id, and is audited. The
// retry budget ends a run of retryable answers.
func TestRedeliver(t *testing.T) {
	f := newFixture(t)
	rcv := &scripted{statuses: []int{400, 204}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	f.setURL("acme", srv.URL)
	f.send("acme", "march.csv", payroll)
	clk := newClock()
	n := notify.New(f.st, notify.Config{Now: clk.Now, RetryBase: time.Second, MaxAttempts: 2})
	if k, err := n.DeliverDue(f.ctx); k != 1 || err != nil {
		t.Fatalf("DeliverDue: %d %v", k, err)
	}
	evs, err := n.Store().List(f.ctx, notify.Filter{State: notify.StateFailed})
	if err != nil || len(evs) != 1 || *evs[0].LastStatus != 400 {
		t.Fatalf("after a 400: %+v %v, want one failed event", evs, err)
	}
	id := evs[0].ID
	if k, _ := n.DeliverDue(f.ctx); k != 0 {
		t.Fatalf("a failed event was sent again by itself")
	}
	if _, err := n.Store().Redeliver(f.ctx, id+100, "ops", clk.Now()); !errors.Is(err, notify.ErrNotFound) {
		t.Fatalf("redeliver an unknown event: %v", err)
	}
	ev, err := n.Store().Redeliver(f.ctx, id, "ops", clk.Now())
	if err != nil || ev.State != notify.StatePending {
		t.Fatalf("redeliver: %+v %v", ev, err)
	}
	if k, err := n.DeliverDue(f.ctx); k != 1 || err != nil {
		t.Fatalf("DeliverDue after redeliver: %d %v", k, err)
	}
	ev, err = n.Store().Event(f.ctx, id)
	if err != nil || ev.State != notify.StateDelivered || ev.Attempts != 2 || len(ev.Log) != 2 {
		t.Fatalf("after redelivery: %+v %v", ev, err)
	}
	if ids := rcv.seen(); len(ids) != 2 || ids[0] != ev.WebhookID || ids[1] != ev.WebhookID {
		t.Fatalf("webhook-ids %v, want %s twice", ids, ev.WebhookID)
	}
	if k := f.count(`SELECT count(*) FROM notify_redeliveries WHERE event_id = $1 AND by_whom = 'ops'`, id); k != 1 {
		t.Fatalf("%d redeliveries audited, want 1", k)
	}

	// 503 for ever: two attempts (MaxAttempts), then failed.
	rcv.mu.Lock()
	rcv.statuses, rcv.ids = []int{503}, nil
	rcv.mu.Unlock()
	f.send("acme", "april.csv", payroll)
	clk.Set(time.Now()) // the event is due from the database's now()
	for range 2 {
		if k, err := n.DeliverDue(f.ctx); k != 1 || err != nil {
			t.Fatalf("DeliverDue: %d %v", k, err)
		}
		clk.Set(clk.Now().Add(time.Hour))
	}
	evs, err = n.Store().List(f.ctx, notify.Filter{Limit: 1})
	if err != nil || evs[0].State != notify.StateFailed || !strings.Contains(evs[0].LastError, "retries exhausted after 2 attempts") {
		t.Fatalf("after two 503s: %+v %v", evs, err)
	}
}

// TestNoSecretNoURL: an event that cannot be signed or has nowhere to go
// fails at once with what to do, and is sent nowhere.
func TestNoSecretNoURL(t *testing.T) {
	f := newFixture(t)
	rcv := &scripted{statuses: []int{204}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	if err := f.st.AddPartner(f.ctx, records.Partner{ID: "nosecret"}); err != nil {
		t.Fatal(err)
	}
	f.setURL("nosecret", srv.URL)
	f.send("nosecret", "march.csv", payroll)
	f.setURL("acme", srv.URL)
	f.send("acme", "march.csv", payroll)
	f.setURL("acme", "")
	reg := prometheus.NewRegistry()
	n := notify.New(f.st, notify.Config{Metrics: notify.NewMetrics(reg)})
	if k, err := n.DeliverDue(f.ctx); k != 2 || err != nil {
		t.Fatalf("DeliverDue: %d %v", k, err)
	}
	for partner, want := range map[string]string{"nosecret": "payintake partner webhook-secret nosecret", "acme": "payintake partner set acme --notify-url"} {
		evs, err := n.Store().List(f.ctx, notify.Filter{Partner: partner})
		if err != nil || len(evs) != 1 || evs[0].State != notify.StateFailed || !strings.Contains(evs[0].LastError, want) {
			t.Errorf("%s: %+v %v, want failed saying %q", partner, evs, err, want)
		}
	}
	if ids := rcv.seen(); len(ids) != 0 {
		t.Fatalf("sent %v", ids)
	}
	if got := counter(t, reg, "payintake_notify_deliveries_total", "result", "failed"); got != 2 {
		t.Errorf("deliveries failed = %v, want 2", got)
	}
	if got := counter(t, reg, "payintake_notify_requests_total", "status", "no_answer"); got != 0 {
		t.Errorf("requests no_answer = %v, want 0: nothing was sent", got)
	}
}

// TestSlowReceiverNeverBlocksProcessing: while a partner's server holds a
// delivery open, files are processed as usual (their events wait their
// turn); an attempt that gets no answer ends at the timeout.
func TestSlowReceiverNeverBlocksProcessing(t *testing.T) {
	f := newFixture(t)
	arrived := make(chan string, 10)
	release := make(chan struct{})
	var answered atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("webhook-id")
		<-release
		answered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	f.setURL("acme", srv.URL)
	n := notify.New(f.st, notify.Config{Concurrency: 1, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	defer stop()

	f.send("acme", "a.csv", payroll)
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first event was not sent within 10s")
	}
	// The only delivery slot is held by the slow receiver; processing goes on.
	for _, name := range []string{"b.csv", "c.csv"} {
		out := f.send("acme", name, payroll)
		if out.Status != records.StatusProcessed {
			t.Fatalf("%s: %s", name, out.Status)
		}
	}
	if answered.Load() != 0 {
		t.Fatal("the receiver answered before it was released: the test proves nothing")
	}
	if k := f.count(`SELECT count(*) FROM notify_events WHERE state = 'pending'`); k != 3 {
		t.Fatalf("%d pending events while the receiver is held, want 3", k)
	}
	close(release)
	eventually.True(t, 20*time.Second, func() bool {
		return f.count(`SELECT count(*) FROM notify_events WHERE state = 'delivered'`) == 3
	}, "the three events delivered after the release")

	stop()

	// No answer at all: the attempt ends at Timeout and is retried later.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leave
		<-r.Context().Done()
	}))
	defer hang.Close()
	f.setURL("acme", hang.URL)
	f.send("acme", "d.csv", payroll)
	short := notify.New(f.st, notify.Config{Timeout: 200 * time.Millisecond})
	if k, err := short.DeliverDue(f.ctx); k != 1 || err != nil {
		t.Fatalf("DeliverDue: %d %v", k, err)
	}
	evs, err := short.Store().List(f.ctx, notify.Filter{Limit: 1})
	if err != nil || evs[0].State != notify.StatePending || evs[0].LastStatus != nil || !strings.Contains(evs[0].LastError, "no answer") {
		t.Fatalf("after a receiver that never answers: %+v %v", evs, err)
	}
}

// TestDrainCutReleasesTheEvent: a process that drains (RunUntil) claims
// nothing once told to stop, lets a delivery in flight get its answer, and
// releases one still unanswered when cut: due again at once, so another
// process sends it with the same webhook-id instead of waiting out the
// claim's lease.
func TestDrainCutReleasesTheEvent(t *testing.T) {
	f := newFixture(t)
	arrived := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("webhook-id")
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leave
		<-r.Context().Done()               // never answers
	}))
	defer srv.Close()
	f.setURL("acme", srv.URL)
	n := notify.New(f.st, notify.Config{Timeout: time.Minute})
	claims, stopClaims := context.WithCancel(f.ctx)
	cut, cutNow := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { n.RunUntil(claims, cut); close(done) }()
	defer func() { stopClaims(); cutNow(); <-done }()

	f.send("acme", "a.csv", payroll)
	var first string
	select {
	case first = <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the event was not sent within 10s")
	}
	stopClaims()
	f.send("acme", "b.csv", payroll) // due now, but the draining process claims no more
	select {
	case <-done:
		t.Fatal("RunUntil returned with a delivery in flight before the cut")
	default:
	}
	cutNow()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunUntil did not return after the cut")
	}
	if k := f.count(`SELECT count(*) FROM notify_events WHERE attempts = 0`); k != 1 {
		t.Fatalf("%d events never tried, want 1: the second, due after the drain began", k)
	}
	var due bool
	var lastErr string
	if err := f.st.Pool().QueryRow(f.ctx, `SELECT next_attempt_at <= now(), last_error FROM notify_events WHERE webhook_id = $1`, first).Scan(&due, &lastErr); err != nil {
		t.Fatal(err)
	}
	if !due || !strings.Contains(lastErr, "cut") {
		t.Fatalf("the cut event: due now %v, last error %q; want due at once, its error saying it was cut", due, lastErr)
	}

	// Another process sends both at once, the cut one with its webhook-id.
	got := make(chan string, 10)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("webhook-id")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ok.Close()
	f.setURL("acme", ok.URL)
	if k, err := notify.New(f.st, notify.Config{}).DeliverDue(f.ctx); err != nil || k != 2 {
		t.Fatalf("another process sent %d events (%v), want both", k, err)
	}
	if a, b := <-got, <-got; a != first && b != first {
		t.Fatalf("the cut event sent again as %q and %q, want webhook-id %q", a, b, first)
	}
}
