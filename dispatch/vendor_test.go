package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/syncbuf"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// vendorReq is one request as the fake vendor saw it.
type vendorReq struct {
	key   string // Idempotency-Key
	auth  string
	ctype string
	agent string // User-Agent
	body  []byte
	lines []string
	at    time.Time
}

// answer is what the fake vendor does with one request. pay: the keys it
// pays (nil: all of the chunk); drop: close the connection after paying.
type answer struct {
	status  int
	header  map[string]string
	body    string
	pay     func(keys []string) []string
	drop    bool
	slow    time.Duration
	results func(keys []string) []map[string]any // 207 body
}

// vendor is a payroll vendor that pays each line key once and answers as
// its script says (default: 200, pay everything).
type vendor struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []vendorReq
	paid     map[string]int // key → times a payment was asked (paid once)
	script   func(n int, r vendorReq) answer
	inflight int
	maxIn    int
}

func newVendor(t testing.TB) *vendor {
	v := &vendor{t: t, paid: map[string]int{}}
	v.srv = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *vendor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var parsed struct {
		Lines []struct {
			Key string `json:"key"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(body, &parsed); err != nil {
		v.t.Errorf("vendor: body is not JSON: %v: %s", err, body)
	}
	req := vendorReq{key: r.Header.Get("Idempotency-Key"), auth: r.Header.Get("Authorization"),
		ctype: r.Header.Get("Content-Type"), agent: r.UserAgent(), body: body, at: time.Now()}
	for _, l := range parsed.Lines {
		req.lines = append(req.lines, l.Key)
	}
	v.mu.Lock()
	n := len(v.reqs)
	v.reqs = append(v.reqs, req)
	v.inflight++
	v.maxIn = max(v.maxIn, v.inflight)
	script := v.script
	v.mu.Unlock()
	defer func() { v.mu.Lock(); v.inflight--; v.mu.Unlock() }()
	a := answer{status: 200}
	if script != nil {
		a = script(n, req)
	}
	if a.slow > 0 {
		// A slow vendor: the time must really pass, so that the
		// dispatcher's timeout fires or requests overlap.
		time.Sleep(a.slow)
	}
	pays := req.lines
	if a.pay != nil {
		pays = a.pay(req.lines)
	} else if !(a.status < 300 || a.status == 409 || a.drop) {
		pays = nil
	}
	if a.results != nil && a.pay == nil {
		pays = nil
		for _, r := range a.results(req.lines) {
			if st := r["status"].(int); st >= 200 && st < 300 || st == 409 {
				pays = append(pays, r["key"].(string))
			}
		}
	}
	v.mu.Lock()
	for _, k := range pays {
		v.paid[k]++
	}
	v.mu.Unlock()
	if a.drop {
		hj, _ := w.(http.Hijacker)
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, val := range a.header {
		w.Header().Set(k, val)
	}
	if a.results != nil {
		b, _ := json.Marshal(map[string]any{"results": a.results(req.lines)})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		w.Write(b)
		return
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func (v *vendor) requests() []vendorReq {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]vendorReq(nil), v.reqs...)
}

func (v *vendor) paidKeys() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := map[string]int{}
	for k, n := range v.paid {
		m[k] = n
	}
	return m
}

// env is a database with partner acme, some records and a target on a fake vendor.
type env struct {
	t      testing.TB
	ctx    context.Context
	store  *records.Store
	in     *intake.Intake
	v      *vendor
	d      *Dispatcher
	delays []time.Duration
	mu     sync.Mutex
	log    syncbuf.Buffer // the dispatcher's log, JSON lines
}

const csvHeader = "employee_ref,pay_period,component,amount,currency\n"

func payroll(n int, period string) string {
	var b strings.Builder
	b.WriteString(csvHeader)
	for i := range n {
		fmt.Fprintf(&b, "E%04d,%s,BASE,%d.00,USD\n", i, period, 1000+i)
	}
	return b.String()
}

func newEnv(t testing.TB, target Target) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), store: pgtest.Store(t)}
	e.in = intake.New(e.store, nil)
	e.v = newVendor(t)
	if err := e.store.AddPartner(e.ctx, records.Partner{ID: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	target.Name, target.URL = "vendor", e.v.srv.URL
	if target.Timeout == 0 {
		target.Timeout = 5 * time.Second
	}
	if target.RetryBase == 0 {
		target.RetryBase = 100 * time.Millisecond
	}
	target.LineStatus = true
	st := NewStore(e.store.Pool())
	if err := st.AddTarget(e.ctx, target); err != nil {
		t.Fatal(err)
	}
	tgt := "vendor"
	if err := e.store.UpdatePartner(e.ctx, "acme", records.PartnerUpdate{Target: &tgt}); err != nil {
		t.Fatal(err)
	}
	e.d = New(e.store.Pool(), Config{Log: slog.New(slog.NewJSONHandler(&e.log, nil)), Sleep: func(ctx context.Context, d time.Duration) error {
		e.mu.Lock()
		e.delays = append(e.delays, d)
		e.mu.Unlock()
		return ctx.Err()
	}})
	return e
}

func (e *env) ingest(name, content string) {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.in.IngestFile(e.ctx, "acme", path, "test"); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) lock(period string) {
	e.t.Helper()
	if _, err := e.store.LockPeriod(e.ctx, "acme", period, records.LockApproved, "lead"); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) dispatch(period string) []Run {
	e.t.Helper()
	runs, err := e.d.Dispatch(e.ctx, "acme", period)
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}

func (e *env) status(period string) []RunStatus {
	e.t.Helper()
	st, err := e.d.Store().Status(e.ctx, "acme", period)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// expectedKeys computes the line keys of the current versions of a period's records.
func (e *env) expectedKeys(period string) map[string]bool {
	e.t.Helper()
	rows, err := e.store.Pool().Query(e.ctx, `SELECT derived_employee_id(partner_id, employee_ref), component, version
		FROM records WHERE partner_id = 'acme' AND pay_period = $1`, period)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]bool{}
	for rows.Next() {
		var emp, comp string
		var v int
		if err := rows.Scan(&emp, &comp, &v); err != nil {
			e.t.Fatal(err)
		}
		m[LineKey("acme", emp, period, comp, v)] = true
	}
	return m
}

// checkPaidOnce: every expected key paid exactly once, nothing else paid.
func (e *env) checkPaidOnce(want map[string]bool) {
	e.t.Helper()
	paid := e.v.paidKeys()
	for k := range want {
		if paid[k] == 0 {
			e.t.Errorf("line %s never paid", k)
		}
	}
	for k := range paid {
		if !want[k] {
			e.t.Errorf("line %s paid but not due", k)
		}
	}
}

// logged returns the dispatcher's log lines with the message msg.
func (e *env) logged(msg string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(e.log.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			e.t.Fatalf("log line %s: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}
