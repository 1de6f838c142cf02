package notify_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/payintake/payintake/notify"
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
