package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/review"
)

type cli struct {
	t   *testing.T
	url string
	dir string
}

func (c *cli) run(args ...string) (int, string, string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append(args, "--database-url", c.url), &out, &errb)
	return code, out.String(), errb.String()
}

func (c *cli) ok(args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(args...)
	if code != 0 {
		c.t.Fatalf("payintake %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

func (c *cli) file(name, content string) string {
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

func TestReviewCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("partner", "add", "acme")
	c.ok("partner", "add", "globex")
	hdr := "employee_ref,pay_period,component,amount,currency\n"
	c.ok("ingest", "--partner", "acme", c.file("jan.csv", hdr+"E1,2024-01,BASE,1000.00,USD\nE2,2024-01,BASE,2000.00,USD\n"))
	if out := c.ok("records", "lock", "--partner", "acme", "--period", "2024-01", "--by", "lead"); !strings.Contains(out, "2 record(s) locked") {
		t.Fatalf("lock: %s", out)
	}
	out := c.ok("ingest", "--partner", "acme", c.file("jan-fix.csv", hdr+"E1,2024-01,BASE,1100.00,USD\nE2,2024-01,BASE,2500.00,USD\n"))
	if !strings.Contains(out, "held=2") {
		t.Fatalf("ingest: %s", out)
	}

	// review list keeps its SPEC shape.
	var xs []map[string]any
	if err := json.Unmarshal([]byte(c.ok("review", "list", "--status", "open", "--format", "json")), &xs); err != nil || len(xs) != 2 {
		t.Fatalf("review list: %v %v", xs, err)
	}
	for _, k := range []string{"id", "partner", "employee_ref", "pay_period", "component", "status", "code", "current", "proposed", "file", "line"} {
		if _, ok := xs[0][k]; !ok {
			t.Fatalf("review list lacks %q: %v", k, xs[0])
		}
	}
	id1, id2 := fmt.Sprint(xs[0]["id"]), fmt.Sprint(xs[1]["id"])

	out = c.ok("review", "show", id1)
	for _, want := range []string{`exception ` + id1 + `: open \(record_locked\)`, `\namount +1000\.00 +1100\.00 +\*`, `\ncurrency +USD +USD +\n`, "record history:"} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("review show lacks %q:\n%s", want, out)
		}
	}
	var d records.ExceptionDetail
	if err := json.Unmarshal([]byte(c.ok("review", "show", id1, "--format", "json")), &d); err != nil || d.Proposed["amount"] != "1100.00" {
		t.Fatalf("review show json: %+v %v", d, err)
	}

	if out := c.ok("review", "approve", id1, "--reviewer", "alice", "--note", "checked"); out != "exception "+id1+" approved by alice\n" {
		t.Fatalf("approve: %q", out)
	}
	code, _, errs := c.run("review", "reject", id1, "--reviewer", "bob")
	if code != 1 || !strings.HasPrefix(errs, "payintake: exception "+id1+" was already approved by alice at ") {
		t.Fatalf("second decision: %d %q", code, errs)
	}
	if code, _, errs := c.run("review", "approve", id2); code != 2 || !strings.Contains(errs, "--reviewer NAME") {
		t.Fatalf("approve without --reviewer: %d %q", code, errs)
	}
	if code, _, _ := c.run("review", "approve", "x1", "--reviewer", "a"); code != 2 {
		t.Fatalf("approve with a bad id: %d", code)
	}
	if code, _, errs := c.run("review", "approve", "99999", "--reviewer", "a"); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("approve an unknown id: %d %q", code, errs)
	}
	if code, _, _ := c.run("review", "frobnicate"); code != 2 {
		t.Fatalf("unknown review command: %d", code)
	}

	// Reviewer accounts: generated password (last line), or from stdin; partner scope applies on the CLI too.
	out = c.ok("reviewer", "add", "gina", "--partners", "globex")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	pw := lines[len(lines)-1]
	st := openStore(t, c.url)
	_, hash, err := st.ReviewerByName(context.Background(), "gina")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := review.CheckPassword(hash, pw); !ok || err != nil || !strings.HasPrefix(hash, "$argon2id$") {
		t.Fatalf("generated password does not match the stored hash (%v)", err)
	}
	code, _, errs = c.run("review", "reject", id2, "--reviewer", "gina")
	if code != 1 || !strings.Contains(errs, "may not decide exceptions of partner acme") {
		t.Fatalf("scoped reviewer on the CLI: %d %q", code, errs)
	}
	if code, _, errs := c.run("reviewer", "add", "gina"); code != 1 || !strings.Contains(errs, "already exists") {
		t.Fatalf("adding a reviewer twice: %d %q", code, errs)
	}
	if code, _, errs := c.run("reviewer", "add", "zed", "--partners", "nope"); code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("reviewer for an unknown partner: %d %q", code, errs)
	}
	stdin = strings.NewReader("a long enough password\n")
	t.Cleanup(func() { stdin = os.Stdin })
	if out := c.ok("reviewer", "add", "carol", "--password-stdin"); strings.Contains(out, "password") {
		t.Fatalf("--password-stdin printed a password: %q", out)
	}
	_, hash, _ = st.ReviewerByName(context.Background(), "carol")
	if ok, _ := review.CheckPassword(hash, "a long enough password"); !ok {
		t.Fatal("password from stdin not stored")
	}
	if out := c.ok("reviewer", "list"); !strings.Contains(out, "gina") || !strings.Contains(out, "globex") {
		t.Fatalf("reviewer list: %s", out)
	}
	if out := c.ok("review", "reject", id2, "--reviewer", "carol", "--note", "no"); out != "exception "+id2+" rejected by carol\n" {
		t.Fatalf("reject: %q", out)
	}

	// Unlock needs who and why, and is recorded.
	if code, _, _ := c.run("records", "unlock", "--partner", "acme", "--period", "2024-01"); code != 2 {
		t.Fatalf("unlock without --by/--reason: %d", code)
	}
	out = c.ok("records", "unlock", "--partner", "acme", "--period", "2024-01", "--by", "cfo", "--reason", "ticket 12")
	if out != "period 2024-01 of partner acme unlocked by cfo: 2 record(s) unlocked\n" {
		t.Fatalf("unlock: %q", out)
	}
	code, _, errs = c.run("records", "unlock", "--partner", "acme", "--period", "2024-01", "--by", "cfo", "--reason", "again")
	if code != 1 || !strings.Contains(errs, "is not locked") {
		t.Fatalf("unlock twice: %d %q", code, errs)
	}
	evs, err := st.LockEvents(context.Background(), "acme", "2024-01")
	if err != nil || len(evs) != 2 || evs[1].Action != "unlock" || evs[1].By != "cfo" || evs[1].Reason != "ticket 12" {
		t.Fatalf("lock events: %+v %v", evs, err)
	}
}

func openStore(t *testing.T, url string) *records.Store {
	t.Helper()
	st, err := records.Open(context.Background(), url, records.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func TestReviewBulkCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("partner", "add", "acme")
	hdr := "employee_ref,pay_period,component,amount,currency\n"
	c.ok("ingest", "--partner", "acme", c.file("feb.csv", hdr+"E1,2024-02,BASE,1000.00,USD\nE2,2024-02,BASE,2000.00,USD\nE3,2024-02,BONUS,10.00,USD\n"))
	c.ok("records", "lock", "--partner", "acme", "--period", "2024-02")
	c.ok("ingest", "--partner", "acme", c.file("feb-late.csv", hdr+"E1,2024-02,BASE,1100.00,USD\nE2,2024-02,BASE,1950.00,USD\nE3,2024-02,BONUS,99.00,USD\n"))

	out := c.ok("review", "approve", "--partner", "acme", "--component", "BASE", "--dry-run", "--reviewer", "alice")
	if out != "dry run: 2 open exception(s), total amount change +50.00 USD; nothing decided\n" {
		t.Fatalf("dry run: %q", out)
	}
	if n := len(openExceptions(t, c)); n != 3 {
		t.Fatalf("the dry run decided something: %d open", n)
	}
	out = c.ok("review", "approve", "--partner", "acme", "--file", "feb-late.csv", "--component", "base", "--reviewer", "alice", "--note", "payroll ok")
	if out != "2 exception(s) approved by alice\n" {
		t.Fatalf("bulk approve: %q", out)
	}
	left := openExceptions(t, c)
	if len(left) != 1 || left[0]["employee_ref"] != "E3" {
		t.Fatalf("open after bulk approve: %v", left)
	}
	out = c.ok("review", "reject", "--partner", "acme", "--min-change", "50", "--reviewer", "bob")
	if out != "1 exception(s) rejected by bob\n" {
		t.Fatalf("bulk reject: %q", out)
	}
	if out := c.ok("review", "reject", "--partner", "acme", "--reviewer", "bob"); out != "0 exception(s) rejected by bob\n" {
		t.Fatalf("nothing left: %q", out)
	}
	for _, bad := range [][]string{
		{"review", "approve", "--period", "2024-02", "--reviewer", "a"},                      // filters without a partner
		{"review", "approve", "7", "--partner", "acme", "--reviewer", "a"},                   // an id and filters
		{"review", "approve", "--partner", "acme", "--min-change", "1e3", "--reviewer", "a"}, // not a plain decimal
		{"review", "approve", "--partner", "acme"},                                           // no reviewer
	} {
		if code, _, errs := c.run(bad...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", bad, code, errs)
		}
	}
	if code, _, errs := c.run("review", "approve", "--partner", "nope", "--reviewer", "a"); code != 1 || !strings.Contains(errs, "unknown partner") {
		t.Errorf("unknown partner: %d %s", code, errs)
	}
}

func openExceptions(t *testing.T, c *cli) []map[string]any {
	t.Helper()
	var xs []map[string]any
	if err := json.Unmarshal([]byte(c.ok("review", "list", "--status", "open", "--format", "json")), &xs); err != nil {
		t.Fatal(err)
	}
	return xs
}

func TestReviewerDisableEnableCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("partner", "add", "acme")
	c.ok("reviewer", "add", "dana", "--partners", "acme")
	out := c.ok("reviewer", "disable", "dana")
	if !strings.HasPrefix(out, "reviewer dana disabled: their sessions and API tokens stopped working") {
		t.Fatalf("disable: %q", out)
	}
	if out := c.ok("reviewer", "disable", "dana"); out != "reviewer dana was already disabled\n" {
		t.Fatalf("disable twice: %q", out)
	}
	if out := c.ok("reviewer", "list", "--format", "json"); !strings.Contains(out, `"disabled": true`) {
		t.Fatalf("list: %s", out)
	}
	if code, _, errs := c.run("review", "approve", "--partner", "acme", "--reviewer", "dana"); code != 1 || !strings.Contains(errs, "reviewer dana is disabled") {
		t.Fatalf("deciding as a disabled reviewer: %d %q", code, errs)
	}
	if out := c.ok("reviewer", "enable", "dana"); out != "reviewer dana enabled: they can log in again\n" {
		t.Fatalf("enable: %q", out)
	}
	if out := c.ok("reviewer", "list", "--format", "json"); !strings.Contains(out, `"disabled": false`) {
		t.Fatalf("list after enable: %s", out)
	}
	if code, _, errs := c.run("reviewer", "disable", "zed"); code != 1 || !strings.Contains(errs, "there is no reviewer zed") {
		t.Fatalf("unknown reviewer: %d %q", code, errs)
	}
	if code, _, _ := c.run("reviewer", "disable"); code != 2 {
		t.Fatalf("no name: %d", code)
	}
}
