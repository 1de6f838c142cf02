package observe

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMiddlewareLabelsAreRoutesNotPaths(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		Note(r.Context(), slog.String("door", "test"), slog.String("thing", r.PathValue("id")))
		slog.New(Handler{slog.NewTextHandler(&inner, nil)}).InfoContext(r.Context(), "inside")
		w.WriteHeader(http.StatusTeapot)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	h := Middleware(mux, NewHTTPMetrics(reg), slog.New(slog.NewTextHandler(&logs, nil)), nil)

	for _, c := range []struct{ method, path, reqID string }{
		{"GET", "/v1/things/123", "abc-1"},
		{"GET", "/v1/things/456", "has space"},
		{"BREW", "/v1/things/789", strings.Repeat("x", 65)},
		{"GET", "/nothing/here", ""},
		{"GET", "/healthz", ""},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		if c.reqID != "" {
			req.Header.Set(RequestIDHeader, c.reqID)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Header().Get(RequestIDHeader)
		if c.reqID == "abc-1" && got != "abc-1" || c.reqID != "abc-1" && len(got) != 32 {
			t.Errorf("%s %s with request id %q: answered %q", c.method, c.path, c.reqID, got)
		}
	}
	want := `
# HELP payintake_http_requests_total HTTP requests by route (the server's route pattern, never the raw path; unmatched for none), method and status code.
# TYPE payintake_http_requests_total counter
payintake_http_requests_total{method="GET",route="/healthz",status="200"} 1
payintake_http_requests_total{method="GET",route="/v1/things/{id}",status="418"} 2
payintake_http_requests_total{method="GET",route="unmatched",status="404"} 1
payintake_http_requests_total{method="other",route="unmatched",status="405"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "payintake_http_requests_total"); err != nil {
		t.Error(err)
	}
	l := logs.String()
	for _, w := range []string{
		`level=WARN msg="http request" request_id=abc-1 method=GET route=/v1/things/{id} path=/v1/things/123 status=418`,
		`door=test thing=123`,
	} {
		if !strings.Contains(l, w) {
			t.Errorf("log lacks %q:\n%s", w, l)
		}
	}
	if strings.Contains(l, "route=/healthz") {
		t.Errorf("a health check is logged at info:\n%s", l)
	}
	if !strings.Contains(inner.String(), `msg=inside request_id=abc-1`) {
		t.Errorf("a line logged inside the request lacks its id: %s", inner.String())
	}
}

var inner bytes.Buffer // lines logged inside the request

func TestKeyHash(t *testing.T) {
	// What `printf run-2 | sha256sum | cut -c1-16` prints: a partner can
	// compute it to find their request.
	if got := KeyHash("run-2"); got != "b9d17232a4c83d99" {
		t.Errorf("KeyHash = %q", got)
	}
}
