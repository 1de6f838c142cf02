package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/creack/pty"

	outbound "github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// TestDispatchCLI: target add, partner set --target, records lock, dispatch
// in the foreground, dispatch status (text and SPEC's JSON fields).
func TestDispatchCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	v := &outbound.Vendor{Every207: 2}
	srv := httptest.NewServer(v)
	defer srv.Close()
	token := c.file("token", "tok-123\n")
	if code, _, errs := c.run("target", "add", "payroll", "--url", srv.URL, "--token-file", filepath.Join(c.dir, "missing")); code != 1 || !strings.Contains(errs, "token") {
		t.Errorf("target add with a missing token file: exit %d: %s", code, errs)
	}
	c.ok("target", "add", "payroll", "--url", srv.URL, "--token-file", token, "--chunk-size", "3", "--retry-base", "10ms")
	var ts []map[string]any
	if err := json.Unmarshal([]byte(c.ok("target", "list", "--format", "json")), &ts); err != nil || len(ts) != 1 ||
		ts[0]["name"] != "payroll" || ts[0]["chunk_size"] != float64(3) || ts[0]["rate_limit"] != float64(10) {
		t.Fatalf("target list: %v %v", ts, err)
	}
	c.ok("partner", "add", "acme")
	if code, _, errs := c.run("partner", "set", "acme", "--target", "nope"); code != 1 || !strings.Contains(errs, "target add") {
		t.Errorf("partner set --target unknown: exit %d: %s", code, errs)
	}
	c.ok("partner", "set", "acme", "--target", "payroll")
	if !strings.Contains(c.ok("partner", "list"), "payroll") {
		t.Error("partner list does not show the target")
	}
	csv := "employee_ref,pay_period,component,amount,currency,hours\n"
	for _, r := range []string{"E1,2026-11,BASE,100.00,USD,", "E2,2026-11,BASE,200.50,USD,8", "E3,2026-11,BONUS,5.00,USD,",
		"E4,2026-11,BASE,1.00,USD,", "Zoë & <co>,2026-11,BASE,9.99,USD,"} {
		csv += r + "\n"
	}
	c.ok("ingest", "--partner", "acme", c.file("nov.csv", csv))
	if code, _, errs := c.run("dispatch", "--partner", "acme", "--period", "2026-11"); code != 1 || !strings.Contains(errs, "locked with reason approved") {
		t.Errorf("dispatch of an unlocked period: exit %d: %s", code, errs)
	}
	c.ok("records", "lock", "--partner", "acme", "--period", "2026-11")
	out := c.ok("dispatch", "--partner", "acme", "--period", "2026-11")
	if !strings.Contains(out, "complete, 5 line(s): 5 succeeded, 0 pending, 0 dead-lettered") {
		t.Errorf("dispatch printed %q", out)
	}
	var st []map[string]any
	if err := json.Unmarshal([]byte(c.ok("dispatch", "status", "--format", "json")), &st); err != nil || len(st) != 1 {
		t.Fatalf("status: %v %v", st, err)
	}
	for _, f := range []string{"partner", "pay_period", "batch_key", "state", "total", "succeeded", "pending", "failed", "attempts", "dead_letters"} {
		if _, ok := st[0][f]; !ok {
			t.Errorf("dispatch status --format json has no %q", f)
		}
	}
	if st[0]["batch_key"] != outbound.BatchKey("acme", "2026-11", 1) || st[0]["state"] != "complete" || st[0]["total"] != float64(5) {
		t.Errorf("status %v", st[0])
	}
	if len(v.Paid()) != 5 {
		t.Errorf("vendor paid %d keys, want 5", len(v.Paid()))
	}
	if !strings.Contains(c.ok("dispatch", "status", "--partner", "acme"), "complete") {
		t.Error("dispatch status (text) does not show the run")
	}
}

// TestDispatchProgressBar runs the foreground dispatch with its stdout on a
// real pseudo-terminal (github.com/creack/pty) and finds the progress bar
// drawn there (the run's batch key, the count of settled lines, 100%,
// redrawn in place with carriage returns); the same command with its stdout
// on a pipe, which is an *os.File but no terminal, prints only the summary.
func TestDispatchProgressBar(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	srv := httptest.NewServer(&outbound.Vendor{})
	defer srv.Close()
	c.ok("target", "add", "payroll", "--url", srv.URL, "--chunk-size", "3", "--rate-limit", "0")
	c.ok("partner", "add", "acme", "--target", "payroll")
	csv := "employee_ref,pay_period,component,amount,currency\n"
	for i := range 7 {
		csv += fmt.Sprintf("E%d,2026-11,BASE,%d.00,USD\nE%d,2026-12,BASE,%d.00,USD\n", i, 100+i, i, 200+i)
	}
	c.ok("ingest", "--partner", "acme", c.file("pay.csv", csv))
	c.ok("records", "lock", "--partner", "acme", "--period", "2026-11")
	c.ok("records", "lock", "--partner", "acme", "--period", "2026-12")

	// On a terminal.
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 160}); err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() { // until the terminal's last side is closed (EIO)
		defer close(read)
		_, _ = io.Copy(&screen, ptmx)
	}()
	var errb bytes.Buffer
	code := run(context.Background(), []string{"dispatch", "--partner", "acme", "--period", "2026-11", "--database-url", c.url}, tty, &errb)
	tty.Close()
	<-read
	out := screen.String()
	if code != 0 {
		t.Fatalf("dispatch on a terminal: exit %d: %s", code, errb.String())
	}
	batch := outbound.BatchKey("acme", "2026-11", 1)
	for _, want := range []string{batch, "100%", "(7/7", "\r", "complete, 7 line(s): 7 succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal shows no %q:\n%q", want, out)
		}
	}

	// On a pipe: an *os.File, but not a terminal.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	piped := make(chan []byte)
	go func() { b, _ := io.ReadAll(pr); piped <- b }()
	errb.Reset()
	code = run(context.Background(), []string{"dispatch", "--partner", "acme", "--period", "2026-12", "--database-url", c.url}, pw, &errb)
	pw.Close()
	got := string(<-piped)
	if code != 0 {
		t.Fatalf("dispatch on a pipe: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(got, "complete, 7 line(s): 7 succeeded") {
		t.Errorf("dispatch on a pipe printed %q, want the summary", got)
	}
	if strings.ContainsAny(got, "\r%") || strings.Contains(got, outbound.BatchKey("acme", "2026-12", 1)+" ") {
		t.Errorf("dispatch on a pipe drew a progress bar: %q", got)
	}
	t.Logf("on a terminal: %d bytes (bar and summary); on a pipe: %q", len(out), got)
}

// TestTargetDefaults: `target add` with only --url takes SPEC's defaults:
// chunks of 200 lines (40 with --no-line-status), --rate-limit 10,
// --max-attempts 5, --retry-base 2s, --timeout 10s.
func TestTargetDefaults(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("target", "add", "lines", "--url", "http://127.0.0.1:1/batches")
	c.ok("target", "add", "nolines", "--url", "http://127.0.0.1:1/batches", "--no-line-status")
	var ts []map[string]any
	if err := json.Unmarshal([]byte(c.ok("target", "list", "--format", "json")), &ts); err != nil || len(ts) != 2 {
		t.Fatalf("target list: %v %v", ts, err)
	}
	for i, want := range []map[string]any{
		{"name": "lines", "chunk_size": 200.0, "line_status": true, "rate_limit": 10.0, "max_attempts": 5.0, "retry_base_seconds": 2.0, "timeout_seconds": 10.0},
		{"name": "nolines", "chunk_size": 40.0, "line_status": false, "rate_limit": 10.0, "max_attempts": 5.0, "retry_base_seconds": 2.0, "timeout_seconds": 10.0},
	} {
		for k, v := range want {
			if ts[i][k] != v {
				t.Errorf("target %s: %s = %v, want %v", want["name"], k, ts[i][k], v)
			}
		}
	}
	if code, _, errs := c.run("target", "add", "lines", "--url", "http://127.0.0.1:2/"); code != 1 || !strings.Contains(errs, "already exists") {
		t.Errorf("a second target of the same name: exit %d: %s", code, errs)
	}
}

// TestDispatchRetryCLI: a period locked before its partner had a target is
// dispatched by `dispatch`; lines the vendor refused exit 1 naming
// `dispatch retry`, which sends them again under the same keys; `partner
// set --target ""` takes the target away.
func TestDispatchRetryCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	v := &outbound.Vendor{}
	var refuse atomic.Bool
	refuse.Store(true)
	var mu sync.Mutex
	var keys []string // Idempotency-Key of every request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if refuse.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error":"unknown employee"}`)
			return
		}
		v.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c.ok("target", "add", "payroll", "--url", srv.URL, "--rate-limit", "0")
	c.ok("partner", "add", "acme")
	c.ok("ingest", "--partner", "acme", c.file("pay.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,10.00,USD\nE2,2026-11,BASE,20.00,USD\n"))
	c.ok("records", "lock", "--partner", "acme", "--period", "2026-11")
	c.ok("partner", "set", "acme", "--target", "payroll") // after the lock

	code, out, errs := c.run("dispatch", "--partner", "acme", "--period", "2026-11")
	if code != 1 || !strings.Contains(out, "2 dead-lettered") || !strings.Contains(errs, "dispatch retry --partner acme --period 2026-11") {
		t.Fatalf("dispatch to a refusing vendor: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var st []outbound.RunStatus
	if err := json.Unmarshal([]byte(c.ok("dispatch", "status", "--partner", "acme", "--format", "json")), &st); err != nil || len(st) != 1 {
		t.Fatalf("status: %v %v", st, err)
	}
	if len(st[0].DeadLetters) != 2 || st[0].DeadLetters[0].Status != 422 || st[0].DeadLetters[0].Detail != `{"error":"unknown employee"}` {
		t.Errorf("dead letters %+v", st[0].DeadLetters)
	}

	refuse.Store(false)
	out = c.ok("dispatch", "retry", "--partner", "acme", "--period", "2026-11")
	if !strings.Contains(out, "2 dead-lettered line(s) of period 2026-11 of partner acme put back") || !strings.Contains(out, "2 succeeded, 0 pending, 0 dead-lettered") {
		t.Errorf("dispatch retry printed %q", out)
	}
	mu.Lock()
	if len(keys) != 2 || keys[1] != keys[0] {
		t.Errorf("requests under %v, want the retry under the first request's Idempotency-Key", keys)
	}
	mu.Unlock()
	if paid := v.Paid(); len(paid) != 2 {
		t.Errorf("vendor paid %d keys, want 2", len(paid))
	}

	c.ok("partner", "set", "acme", "--target", "")
	var ps []map[string]any
	if err := json.Unmarshal([]byte(c.ok("partner", "list", "--format", "json")), &ps); err != nil || len(ps) != 1 || ps[0]["target"] != "" {
		t.Errorf("after partner set --target \"\": %v %v", ps, err)
	}
}
