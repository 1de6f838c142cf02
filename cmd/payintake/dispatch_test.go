package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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
