package notify_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/payintake/payintake/internal/observe"
	"github.com/payintake/payintake/notify"
)

// A receiver's logs say which release of payintake sent a notification.
func TestUserAgentNamesTheVersion(t *testing.T) {
	f := newFixture(t)
	agents := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agents <- r.UserAgent()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	f.setURL("acme", srv.URL)
	f.send("acme", "march.csv", payroll)
	if k, err := notify.New(f.st, notify.Config{}).DeliverDue(f.ctx); k != 1 || err != nil {
		t.Fatalf("DeliverDue: %d %v", k, err)
	}
	if got, want := <-agents, "payintake-notify/"+observe.BuildInfo().Version; got != want {
		t.Fatalf("User-Agent %q, want %q", got, want)
	}
}
