package dispatch

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHostileRedirectIsNotPaid: a vendor (or a proxy in front of it)
// answering a chunk with a redirect pays nothing. The redirect is not
// followed, so the server its Location names sees no request (before: a
// 302 became a body-less GET whose 200 marked every line paid, and a 307
// or 308 re-POSTed the payroll there); the 3xx is "any other status":
// every line is dead-lettered with the status, shown by dispatch status.
func TestHostileRedirectIsNotPaid(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			var elsewhere atomic.Int32
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				w.WriteHeader(http.StatusOK)
			}))
			defer other.Close()
			e := newEnv(t, Target{ChunkSize: 10, MaxAttempts: 5})
			e.ingest("a.csv", payroll(4, "2026-11"))
			e.lock("2026-11")
			loc := other.URL + "/batches"
			e.v.script = func(n int, r vendorReq) answer {
				return answer{status: code, header: map[string]string{"Location": loc}, body: "moved"}
			}
			e.dispatch("2026-11")
			if n := len(e.v.requests()); n != 1 {
				t.Errorf("%d requests to the vendor, want 1 (a 3xx is not retried)", n)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the Location's server got %d requests: the redirect was followed", n)
			}
			if paid := e.v.paidKeys(); len(paid) != 0 {
				t.Errorf("the vendor paid %d lines", len(paid))
			}
			st := e.status("2026-11")[0]
			if st.Succeeded != 0 || st.Failed != 4 || st.State != RunComplete || st.Attempts != 1 || len(st.DeadLetters) != 4 {
				t.Fatalf("status %+v, want 4 dead letters and nothing succeeded", st)
			}
			for _, dl := range st.DeadLetters {
				if dl.Status != code || !strings.Contains(dl.Detail, "redirect to "+loc+" not followed") || !strings.HasSuffix(dl.Detail, ": moved") {
					t.Errorf("dead letter %+v, want status %d naming the Location and keeping the body", dl, code)
				}
			}
		})
	}
}
