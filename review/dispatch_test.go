package review

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/records"
)

// TestConsoleDispatchPage: a period's runs, progress and dead letters, only
// for reviewers of its partner.
func TestConsoleDispatchPage(t *testing.T) {
	f := newFixture(t)
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		w.Write([]byte(`{"error":"unknown worker"}`))
	}))
	defer vendor.Close()
	ds := dispatch.NewStore(f.store.Pool())
	if err := ds.AddTarget(f.ctx, dispatch.Target{Name: "vendor", URL: vendor.URL, ChunkSize: 10, MaxAttempts: 2,
		RetryBase: time.Millisecond, Timeout: 5 * time.Second, LineStatus: true}); err != nil {
		t.Fatal(err)
	}
	tgt := "vendor"
	if err := f.store.UpdatePartner(f.ctx, "acme", records.PartnerUpdate{Target: &tgt}); err != nil {
		t.Fatal(err)
	}
	if _, err := dispatch.New(f.store.Pool(), dispatch.Config{}).Dispatch(f.ctx, "acme", "2024-01"); err != nil {
		t.Fatal(err)
	}
	ts := serve(t, f)
	alice := newConsole(t, ts.URL)
	if st := alice.login("alice", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}
	st, _, body := alice.do("GET", "/review/dispatch/acme/2024-01", nil, nil)
	if st != 200 {
		t.Fatalf("dispatch page: %d\n%s", st, body)
	}
	for _, want := range []string{"Run 1", dispatch.BatchKey("acme", "2024-01", 1), "complete", `value="100"`,
		"Dead letters", "E1", "E3", "422", "unknown worker", "dispatch retry --partner acme --period 2024-01"} {
		if !strings.Contains(body, want) {
			t.Errorf("dispatch page lacks %q", want)
		}
	}
	if st, _, body := alice.do("GET", "/review/dispatch", nil, nil); st != 200 || !strings.Contains(body, `href="/review/dispatch/acme/2024-01"`) {
		t.Errorf("dispatch index: %d\n%s", st, body)
	}
	if st, _, _ := alice.do("GET", "/review/dispatch/acme/2099-01", nil, nil); st != 404 {
		t.Errorf("a period never dispatched: %d, want 404", st)
	}
	gina := newConsole(t, ts.URL)
	gina.login("gina", testPassword)
	if st, _, _ := gina.do("GET", "/review/dispatch/acme/2024-01", nil, nil); st != 403 {
		t.Errorf("a reviewer of globex only on acme's dispatch: %d, want 403", st)
	}
	if st, _, body := gina.do("GET", "/review/dispatch", nil, nil); st != 200 || strings.Contains(body, "acme") {
		t.Errorf("gina's dispatch index shows acme: %d", st)
	}
}
