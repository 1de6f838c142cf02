package notify_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payintake/payintake/notify"
	"github.com/payintake/payintake/records"
)

// TestHostileRedirectIsNotDelivered: a receiver answering with a redirect
// has not received the event. The redirect is not followed (the server its
// Location names sees nothing: the signed body never goes to a host other
// than the partner's notify URL); the event fails with the 3xx, as any
// other status that is not retried, and the Location is in its last error.
func TestHostileRedirectIsNotDelivered(t *testing.T) {
	f := newFixture(t)
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	loc := other.URL + "/events"
	codes := []int{301, 302, 303, 307, 308}
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Redirect(w, r, loc, code)
	}))
	defer srv.Close()
	n := notify.New(f.st, notify.Config{})
	for i, code := range codes {
		f.setURL("acme", srv.URL+"/?code="+strconv.Itoa(code))
		f.send("acme", "r"+strconv.Itoa(i)+".csv", payroll)
		if k, err := n.DeliverDue(f.ctx); k != 1 || err != nil {
			t.Fatalf("%d: DeliverDue: %d %v", code, k, err)
		}
		evs, err := n.Store().List(f.ctx, notify.Filter{Partner: "acme", Limit: 1})
		if err != nil || len(evs) != 1 {
			t.Fatalf("%d: %v %v", code, evs, err)
		}
		ev := evs[0]
		if ev.State != notify.StateFailed || ev.LastStatus == nil || *ev.LastStatus != code ||
			!strings.Contains(ev.LastError, "redirect to "+loc+" not followed") || ev.DeliveredAt != nil {
			t.Errorf("%d: event %s, status %v, error %q; want failed with the 3xx and its Location", code, ev.State, ev.LastStatus, ev.LastError)
		}
	}
	if got := asked.Load(); got != int32(len(codes)) {
		t.Errorf("the receiver was asked %d times, want %d (a 3xx is not retried)", got, len(codes))
	}
	if got := elsewhere.Load(); got != 0 {
		t.Errorf("the Location's server got %d requests: a redirect was followed", got)
	}
}

// TestHostileHangingReceiverDoesNotHoldOthers: partner acme's receiver
// takes every request and never answers, with 12 events queued; partner
// beta's event, queued after them, is delivered within a few seconds
// (before: acme's events held all 4 delivery slots, one Timeout after
// another, and beta's event waited 28–30 s at the default 10 s timeout).
// The timeout here is a minute, so acme's slot stays held for the test.
func TestHostileHangingReceiverDoesNotHoldOthers(t *testing.T) {
	f := newFixture(t)
	if err := f.st.AddPartner(f.ctx, records.Partner{ID: "beta"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.AddWebhookSecret(f.ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	const queued = 12
	release := make(chan struct{})
	var held atomic.Int32
	arrived := make(chan struct{}, queued)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Add(1)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release) // before Close, which waits for the handlers
	got := make(chan string, 10)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("webhook-id")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ok.Close()
	f.setURL("acme", hang.URL)
	f.setURL("beta", ok.URL)
	for i := range queued {
		f.send("acme", "a"+strconv.Itoa(i)+".csv", payroll)
	}

	n := notify.New(f.st, notify.Config{Concurrency: 4, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(f.ctx)
	stopped := make(chan struct{})
	go func() { n.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	select { // the first attempt takes a slot at Run's first claim
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("acme's receiver got no request within 10s")
	}

	f.send("beta", "b.csv", payroll)
	start := time.Now()
	select {
	case id := <-got:
		waited := time.Since(start)
		if !strings.HasPrefix(id, "msg_submission.processed_") {
			t.Errorf("beta's receiver got webhook-id %q", id)
		}
		t.Logf("SUMMARY hanging receiver: %d events of acme queued, acme holding %d request(s); beta's event delivered %v after it was queued",
			queued, held.Load(), waited.Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatalf("beta's event was not delivered within 5s while acme's receiver hangs (%d of acme's requests held)", held.Load())
	}
	if h := held.Load(); h != 1 {
		t.Errorf("acme's hanging receiver holds %d requests, want 1 (one slot per partner)", h)
	}
	if k := f.count(`SELECT count(*) FROM notify_events WHERE partner_id = 'acme' AND attempts = 0`); k != queued-1 {
		t.Errorf("%d of acme's events untried, want %d: one at a time per partner", k, queued-1)
	}
}
