package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/openapicheck"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// tenv is one test's server: a fresh database with partners acme and other,
// each with an API token and a webhook secret.
type tenv struct {
	t      *testing.T
	ctx    context.Context
	st     *records.Store
	api    *API
	srv    *httptest.Server
	token  map[string]string
	secret map[string]string
}

func newEnv(t *testing.T, cfg Config) *tenv {
	t.Helper()
	ctx := context.Background()
	st := pgtest.Store(t)
	e := &tenv{t: t, ctx: ctx, st: st, token: map[string]string{}, secret: map[string]string{}}
	for _, id := range []string{"acme", "other"} {
		if err := st.AddPartner(ctx, records.Partner{ID: id}); err != nil {
			t.Fatal(err)
		}
		tok, err := st.IssueAPIToken(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sec, err := st.AddWebhookSecret(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		e.token[id], e.secret[id] = tok, sec
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	e.api = New(intake.New(st, nil), partnerauth.New(st), cfg)
	// Every response the tests provoke is held against openapi.json.
	e.srv = httptest.NewServer(openapicheck.Handler(t, openapicheck.MustParse(t, openAPI), e.api.Handler()))
	t.Cleanup(e.srv.Close)
	return e
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.body, err)
	}
	return m
}

func (r resp) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

func (e *tenv) do(req *http.Request) resp {
	e.t.Helper()
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

// submitReq builds a submission request; an empty key sends no header.
func (e *tenv) submitReq(partner, key, name string, body io.Reader) *http.Request {
	e.t.Helper()
	u := e.srv.URL + "/v1/submissions"
	if name != "" {
		u += "?name=" + name
	}
	req, err := http.NewRequest("POST", u, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/csv")
	if partner != "" {
		req.Header.Set("Authorization", "Bearer "+e.token[partner])
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return req
}

func (e *tenv) submit(partner, key, name, body string) resp {
	e.t.Helper()
	return e.do(e.submitReq(partner, key, name, strings.NewReader(body)))
}

func (e *tenv) get(partner, path string) resp {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if partner != "" {
		req.Header.Set("Authorization", "Bearer "+e.token[partner])
	}
	return e.do(req)
}

// hook delivers a webhook for partner signed with secret at ts.
func (e *tenv) hookAt(partner, secret, id string, ts time.Time, body string) resp {
	e.t.Helper()
	sig, err := Sign(secret, id, ts.Unix(), []byte(body))
	if err != nil {
		e.t.Fatal(err)
	}
	return e.hookRaw(partner, id, strconv.FormatInt(ts.Unix(), 10), sig, body)
}

func (e *tenv) hook(partner, id, body string) resp {
	e.t.Helper()
	return e.hookAt(partner, e.secret[partner], id, time.Now(), body)
}

func (e *tenv) hookRaw(partner, id, ts, sig, body string) resp {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.srv.URL+"/v1/webhooks/"+partner, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("webhook-id", id)
	}
	if ts != "" {
		req.Header.Set("webhook-timestamp", ts)
	}
	if sig != "" {
		req.Header.Set("webhook-signature", sig)
	}
	return e.do(req)
}

func (e *tenv) count(query string, args ...any) int {
	e.t.Helper()
	return pgtest.Count(e.ctx, e.t, e.st, query, args...)
}

func (e *tenv) record(partner, emp, period, comp string) records.Record {
	e.t.Helper()
	r, err := e.st.FindRecord(e.ctx, partner, emp, period, comp)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func wantStatus(t *testing.T, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
}

// wantProblem checks an RFC 7807 answer with status and code.
func wantProblem(t *testing.T, r resp, status int, code string) map[string]any {
	t.Helper()
	wantStatus(t, r, status)
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	m := r.json(t)
	if m["code"] != code || m["status"] != float64(status) || m["type"] == "" || m["title"] == "" {
		t.Fatalf("problem %s, want status %d code %s", r.body, status, code)
	}
	return m
}

const csvHeader = "employee_ref,pay_period,component,amount,currency\n"

func csvRows(rows ...string) string { return csvHeader + strings.Join(rows, "\n") + "\n" }

func change(entity string, version int, emp, amount string) string {
	return fmt.Sprintf(`{"entity_id":%q,"version":%d,"employee_ref":%q,"pay_period":"2026-03","component":"BASE","amount":%q,"currency":"USD"}`,
		entity, version, emp, amount)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func incoming(partner, name, path string) records.Incoming {
	return records.Incoming{PartnerID: partner, FileName: name, Source: "sftp", Path: path}
}

// atOnce runs f(0) to f(n-1) in n goroutines released together, so that they
// race, and waits for them all.
func atOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}
