package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/payintake/payintake/internal/syncbuf"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/observe"
	"github.com/payintake/payintake/internal/openapicheck"
)

// observedEnv is newEnv behind serve's middleware, with metrics on reg and
// every log line written both as text and as JSON.
func observedEnv(t *testing.T) (e *tenv, reg *prometheus.Registry, text, js *syncbuf.Buffer) {
	t.Helper()
	e = newEnv(t, Config{})
	reg = prometheus.NewRegistry()
	text, js = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	log := slog.New(observe.Handler{Handler: slog.NewMultiHandler(slog.NewTextHandler(text, nil), slog.NewJSONHandler(js, nil))})
	e.api.in.Metrics = intake.NewMetrics(reg)
	e.api.in.Log, e.api.log = log, log
	e.srv.Close()
	e.srv = httptest.NewServer(openapicheck.Handler(t, openapicheck.MustParse(t, openAPI),
		observe.Middleware(e.api.Handler(), observe.NewHTTPMetrics(reg), log, nil)))
	t.Cleanup(e.srv.Close)
	return e, reg, text, js
}

// TestDoorsCountedAndLogged drives the HTTP door and the webhook door
// through their decisions and refusals, and checks for each its metric and
// its one "http request" line, in text and in JSON, with the ids to follow
// it and never a secret.
func TestDoorsCountedAndLogged(t *testing.T) {
	e, reg, text, js := observedEnv(t)
	body := csvRows("E1,2026-03,BASE,100.00,USD", "E2,2026-03,BASE,12.345,USD")
	key := "run-2026-03-secret-ish"

	created := e.submit("acme", key, "march.csv", body)
	wantStatus(t, created, http.StatusCreated)
	env := int64(created.json(t)["id"].(float64))
	rid := created.header.Get(observe.RequestIDHeader)
	replay := e.submit("acme", key, "march.csv", body)
	reuse := e.submit("acme", key, "march.csv", body+"E3,2026-03,BASE,1.00,USD\n")
	wantProblem(t, reuse, http.StatusUnprocessableEntity, "idempotency_key_reuse")
	badToken := e.do(func() *http.Request {
		r := e.submitReq("", key, "march.csv", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer pit_nope")
		r.Header.Set(observe.RequestIDHeader, "proxy-id-42")
		return r
	}())
	wantProblem(t, badToken, http.StatusUnauthorized, "unauthorized")
	if got := badToken.header.Get(observe.RequestIDHeader); got != "proxy-id-42" {
		t.Errorf("a sane incoming request id is kept: got %q", got)
	}
	if rid == "" || rid == replay.header.Get(observe.RequestIDHeader) {
		t.Errorf("request ids %q and %q: want a new one per request", rid, replay.header.Get(observe.RequestIDHeader))
	}
	wantStatus(t, e.get("acme", fmt.Sprintf("/v1/submissions/%d", env)), http.StatusOK)
	wantStatus(t, e.get("acme", "/v1/submissions/"+strconv.FormatInt(env+1000, 10)), http.StatusNotFound)
	del, _ := http.NewRequest("DELETE", e.srv.URL+"/v1/submissions", nil)
	wantProblem(t, e.do(del), http.StatusMethodNotAllowed, "method_not_allowed")

	wantStatus(t, e.hook("acme", "msg_1", change("ent-1", 1, "E9", "2150.00")), http.StatusOK)
	wantStatus(t, e.hook("acme", "msg_1", change("ent-1", 1, "E9", "2150.00")), http.StatusOK)
	wantProblem(t, e.hookAt("acme", e.secret["other"], "msg_2", time.Now(), change("ent-1", 2, "E9", "1.00")), http.StatusUnauthorized, "signature_invalid")
	wantProblem(t, e.hookAt("acme", e.secret["acme"], "msg_3", time.Now().Add(-time.Hour), change("ent-1", 2, "E9", "1.00")), http.StatusUnauthorized, "timestamp_out_of_tolerance")
	wantProblem(t, e.hook("acme", "msg_4", `{"entity_id":"ent-2","version":1,"employee_ref":"E8","pay_period":"2026-03","component":"BASE","amount":10.5,"currency":"USD"}`),
		http.StatusUnprocessableEntity, "money_not_string")

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"payintake_envelopes_total", map[string]string{"source": "http", "outcome": "processed"}, 1},
		{"payintake_envelopes_total", map[string]string{"source": "http", "outcome": "replay"}, 1},
		{"payintake_envelopes_total", map[string]string{"source": "http", "outcome": "key_reuse"}, 1},
		{"payintake_rows_total", map[string]string{"source": "http", "outcome": "created"}, 1},
		{"payintake_rows_total", map[string]string{"source": "http", "outcome": "rejected"}, 1},
		{"payintake_http_requests_total", map[string]string{"route": "/v1/submissions", "method": "POST", "status": "201"}, 2},
		{"payintake_http_requests_total", map[string]string{"route": "/v1/submissions", "method": "POST", "status": "422"}, 1},
		{"payintake_http_requests_total", map[string]string{"route": "/v1/submissions", "method": "POST", "status": "401"}, 1},
		{"payintake_http_requests_total", map[string]string{"route": "/v1/submissions/{id}", "method": "GET", "status": "200"}, 1},
		{"payintake_http_requests_total", map[string]string{"route": "/v1/submissions/{id}", "method": "GET", "status": "404"}, 1},
		{"payintake_http_requests_total", map[string]string{"route": "/v1/", "method": "DELETE", "status": "405"}, 1},
		{"payintake_http_requests_total", map[string]string{"route": "/v1/webhooks/{partner}", "method": "POST", "status": "401"}, 2},
		{"payintake_http_request_duration_seconds", map[string]string{"route": "/v1/webhooks/{partner}", "method": "POST"}, 5},
		{"payintake_webhook_deliveries_total", map[string]string{"result": "created"}, 1},
		{"payintake_webhook_deliveries_total", map[string]string{"result": "replay"}, 1},
		{"payintake_webhook_deliveries_total", map[string]string{"result": "signature_invalid"}, 1},
		{"payintake_webhook_deliveries_total", map[string]string{"result": "timestamp_out_of_tolerance"}, 1},
		{"payintake_webhook_deliveries_total", map[string]string{"result": "quarantined"}, 1},
	} {
		if got := metricValue(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	// One line per request, in both formats, with the decision's facts.
	want := []map[string]any{
		{"level": "INFO", "door": "http", "partner": "acme", "status": 201.0, "envelope": float64(env), "envelope_status": "processed",
			"created": 1.0, "rejected": 1.0, "key_hash": observe.KeyHash(key), "route": "/v1/submissions", "request_id": rid},
		{"level": "INFO", "door": "http", "partner": "acme", "status": 201.0, "replayed": true, "envelope": float64(env)},
		{"level": "WARN", "door": "http", "partner": "acme", "status": 422.0, "code": "idempotency_key_reuse", "key_hash": observe.KeyHash(key)},
		{"level": "WARN", "door": "http", "status": 401.0, "code": "unauthorized", "request_id": "proxy-id-42"},
		{"level": "INFO", "door": "http", "partner": "acme", "status": 200.0, "envelope": float64(env)},
		{"level": "WARN", "door": "http", "partner": "acme", "status": 404.0, "code": "not_found"},
		{"level": "WARN", "door": "http", "status": 405.0, "code": "method_not_allowed", "route": "/v1/"},
		{"level": "INFO", "door": "webhook", "partner": "acme", "webhook_id": "msg_1", "status": 200.0, "outcome": "created"},
		{"level": "INFO", "door": "webhook", "partner": "acme", "webhook_id": "msg_1", "status": 200.0, "replayed": true},
		{"level": "WARN", "door": "webhook", "partner": "acme", "webhook_id": "msg_2", "status": 401.0, "code": "signature_invalid"},
		{"level": "WARN", "door": "webhook", "partner": "acme", "webhook_id": "msg_3", "status": 401.0, "code": "timestamp_out_of_tolerance"},
		{"level": "WARN", "door": "webhook", "partner": "acme", "webhook_id": "msg_4", "status": 422.0, "code": "money_not_string", "quarantined": true},
	}
	lines := jsonLines(t, js.String(), "http request")
	if len(lines) != len(want) {
		t.Fatalf("%d http request lines, want 12 (one per request):\n%s", len(lines), text)
	}
	if n := strings.Count(text.String(), "msg=\"http request\""); n != 12 {
		t.Errorf("%d text lines, want 12", n)
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v\n%v", i, k, lines[i][k], v, lines[i])
			}
		}
	}
	if !strings.Contains(text.String(), fmt.Sprintf("envelope=%d envelope_status=processed created=1 rejected=1", env)) {
		t.Errorf("text lines lack the counts as key=value:\n%s", text)
	}
	for _, secret := range []string{e.token["acme"], e.secret["acme"], e.secret["other"], key, "2150.00", "12.345", "pit_nope"} {
		if strings.Contains(text.String(), secret) || strings.Contains(js.String(), secret) {
			t.Errorf("a secret, key or row value %q is in the logs", secret)
		}
	}
}

func jsonLines(t *testing.T, s, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// metricValue is a counter's value, or a histogram's count, of the series of
// name with these labels (0 when there is none).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return value(m)
		}
	}
	return 0
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}
