package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

func TestIngestCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("partner", "add", "acme", "--name", "Acme Corp", "--currency", "usd", "--date-format", "MM/DD/YYYY")
	results := filepath.Join(c.dir, "results")
	clean := filepath.Join("..", "..", "sample-files", "clean-first-run.csv")
	out := c.ok("ingest", "--partner", "acme", "--results-dir", results, clean)
	if !strings.HasPrefix(out, "clean-first-run.csv: envelope 1 processed created=8 updated=0 unchanged=0 held=0 stale=0 rejected=0") {
		t.Errorf("summary: %q", out)
	}
	res, err := os.ReadFile(filepath.Join(results, "clean-first-run.result.csv"))
	if err != nil {
		t.Fatalf("result file not written: %v", err)
	}
	if !strings.HasPrefix(string(res), "line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message\n2,1,created,E00101,2026-11,BASE,4000.00,USD,,,\n") {
		t.Errorf("result file: %s", res)
	}
	// The same file again is a repeat (status replay) with the same result bytes.
	out = c.ok("ingest", "--partner", "acme", "--results-dir", results, clean)
	if !strings.Contains(out, "replay of envelope 1") || !strings.Contains(out, "created=8") {
		t.Errorf("repeat summary: %q", out)
	}
	again, _ := os.ReadFile(filepath.Join(results, "clean-first-run.result.csv"))
	if !bytes.Equal(res, again) {
		t.Error("the repeat's result file differs")
	}
	// The partner's date format and default currency apply.
	us := c.file("us-dates.csv", "employee_ref,pay_period,component,amount,pay_date\nE9,2026-11,BASE,10.00,11/30/2026\n")
	if out := c.ok("ingest", "--partner", "acme", us); !strings.Contains(out, "created=1") {
		t.Errorf("partner settings not applied: %q", out)
	}
	var partners []map[string]any
	if err := json.Unmarshal([]byte(c.ok("partner", "list", "--format", "json")), &partners); err != nil {
		t.Fatal(err)
	}
	if len(partners) != 1 || partners[0]["id"] != "acme" || partners[0]["currency"] != "USD" || partners[0]["date_format"] != "MM/DD/YYYY" {
		t.Errorf("partner list: %v", partners)
	}
}

func TestCLIExitCodes(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	cases := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"ingest", "x.csv"}, 2, "--partner"},
		{[]string{"partner", "add", "Bad ID!"}, 2, "lowercase"},
		{[]string{"partner", "add", "x", "--date-format", "DD/MM/YY"}, 2, "--date-format"},
		{[]string{"partner", "add", "x", "--currency", "EURO"}, 2, "ISO 4217"},
		{[]string{"partner", "add", "x", "--mode", "some"}, 2, "--mode"},
		{[]string{"ingest", "--partner", "nobody", filepath.Join("..", "..", "sample-files", "bad-rows.csv")}, 1, "partner add nobody"},
		{[]string{"ingest", "--partner", "nobody", "/no/such/file.csv"}, 1, "cannot read"},
		{[]string{"records", "lock", "--partner", "x"}, 2, "--period"},
		{[]string{"serve", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"partner", "add", "x", "--file-pattern", "a(?P<seq>[a-z]+)"}, 2, "digits only"},
	}
	for _, tc := range cases {
		code, _, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("payintake %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), code, errs, tc.code, tc.says)
		}
		if strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("payintake %s: error is not one line: %q", strings.Join(tc.args, " "), errs)
		}
	}
}

// TestEmbeddedDefault runs the CLI with no database URL: it must create,
// start, use and stop its own cluster in the data dir.
func TestEmbeddedDefault(t *testing.T) {
	tmp := t.TempDir()
	dataDir := filepath.Join(tmp, "data")
	// t.TempDir makes 0700 folders; the cluster runs as the postgres user
	// when the tests run as root, and must be able to enter them.
	for _, d := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runIn := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--data-dir", dataDir), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, _, errs := runIn("partner", "add", "acme"); code != 0 {
		t.Fatalf("partner add: %d %s", code, errs)
	}
	code, out, errs := runIn("ingest", "--partner", "acme", filepath.Join("..", "..", "sample-files", "messy-export.csv"))
	if code != 0 || !strings.Contains(out, "created=5") {
		t.Fatalf("ingest: %d %q %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postgres", "PG_VERSION")); err != nil {
		t.Errorf("no cluster in the data dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postgres", "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("the cluster was left running after the command (postmaster.pid: %v)", err)
	}
	// Data survives across commands.
	code, out, _ = runIn("ingest", "--partner", "acme", filepath.Join("..", "..", "sample-files", "messy-export.csv"))
	if code != 0 || !strings.Contains(out, "replay") {
		t.Errorf("second ingest: %d %q", code, out)
	}
}

func TestCLIUsability(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	// Flags may come before the command.
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--database-url", c.url, "partner", "add", "early"}, &out, &errb); code != 0 {
		t.Fatalf("flags before the command: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(c.ok("partner", "list"), "early") {
		t.Error("partner added with leading flags is missing")
	}
	// -h prints the command's flags on stdout and succeeds.
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"ingest", "-h"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "-results-dir") {
		t.Errorf("ingest -h: exit %d, stdout %q", code, out.String())
	}
	// An unreachable external database is one sentence that says what to check.
	out.Reset()
	errb.Reset()
	code := run(context.Background(), []string{"partner", "list", "--database-url", "postgres://x@127.0.0.1:1/db"}, &out, &errb)
	msg := errb.String()
	if code != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "connection refused; check the URL") {
		t.Errorf("unreachable database: exit %d, stderr %q", code, msg)
	}
}
