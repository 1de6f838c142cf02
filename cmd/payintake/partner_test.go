package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// authorizedKey returns a fresh public key as an authorized_keys line.
func authorizedKey(t *testing.T) []byte {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return ssh.MarshalAuthorizedKey(sp)
}

// TestPartnerSet: partner set changes exactly the settings it is given, and
// refuses a bad value without changing anything.
func TestPartnerSet(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	one, two := authorizedKey(t), authorizedKey(t)
	keysOne := c.file("one.pub", string(one))
	keysBoth := c.file("both.pub", string(one)+string(two))
	keysTwo := c.file("two.pub", string(two))
	c.ok("partner", "add", "acme", "--name", "Acme", "--date-format", "DD.MM.YYYY", "--mode", "all-or-nothing",
		"--authorized-keys", keysOne, "--unknown-employee", "hold")
	c.ok("partner", "add", "plain")

	show := func(id string) map[string]any {
		t.Helper()
		var ps []map[string]any
		if err := json.Unmarshal([]byte(c.ok("partner", "list", "--format", "json")), &ps); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p["id"] == id {
				delete(p, "created_at")
				return p
			}
		}
		t.Fatalf("partner %s not listed", id)
		return nil
	}
	want := map[string]any{"id": "acme", "name": "Acme", "delimiter": "", "decimal_comma": false, "date_format": "DD.MM.YYYY",
		"currency": "", "file_pattern": "", "mode": "all-or-nothing", "unknown_employee": "hold", "target": "", "notify_url": "", "keys": float64(1), "allow_from": []any{}, "pgp": "off"}
	plain := map[string]any{"id": "plain", "name": "", "delimiter": "", "decimal_comma": false, "date_format": "",
		"currency": "", "file_pattern": "", "mode": "row", "unknown_employee": "create", "target": "", "notify_url": "", "keys": float64(0), "allow_from": []any{}, "pgp": "off"}
	check := func(step string) {
		t.Helper()
		for id, w := range map[string]map[string]any{"acme": want, "plain": plain} {
			got := show(id)
			for k, v := range w {
				if fmt.Sprint(got[k]) != fmt.Sprint(v) {
					t.Errorf("%s: partner %s %s = %v, want %v", step, id, k, got[k], v)
				}
			}
			if len(got) != len(w) {
				t.Errorf("%s: partner %s lists %d fields, want %d: %v", step, id, len(got), len(w), got)
			}
		}
	}
	check("after add")
	if !strings.Contains(c.ok("partner", "list"), "UNKNOWN EMPLOYEE") {
		t.Error("partner list has no UNKNOWN EMPLOYEE column")
	}

	steps := []struct {
		args   []string
		change map[string]any
	}{
		{[]string{"--currency", "eur"}, map[string]any{"currency": "EUR"}},
		{[]string{"--delimiter", "tab", "--decimal-comma"}, map[string]any{"delimiter": "\t", "decimal_comma": true}},
		{[]string{"--decimal-comma=false", "--name", "Acme Corp"}, map[string]any{"decimal_comma": false, "name": "Acme Corp"}},
		{[]string{"--unknown-employee", "reject", "--mode", "row"}, map[string]any{"unknown_employee": "reject", "mode": "row"}},
		{[]string{"--file-pattern", `^pay_(?P<seq>\d+)\.csv$`}, map[string]any{"file_pattern": `^pay_(?P<seq>\d+)\.csv$`}},
		{[]string{"--authorized-keys", keysBoth}, map[string]any{"keys": float64(2)}},
		{[]string{"--authorized-keys", keysTwo}, map[string]any{"keys": float64(1)}}, // the rotated-out key is revoked
		{[]string{"--pgp", "accept"}, map[string]any{"pgp": "accept"}},
		{[]string{"--allow-from", "198.51.100.0/24, 192.0.2.7,2001:db8::/32"}, map[string]any{"allow_from": []any{"198.51.100.0/24", "192.0.2.7/32", "2001:db8::/32"}}},
		// Empty values go back to the defaults where the default is "none".
		{[]string{"--delimiter", "", "--date-format", "", "--currency", "", "--file-pattern", "", "--allow-from", ""},
			map[string]any{"delimiter": "", "date_format": "", "currency": "", "file_pattern": "", "allow_from": []any{}}},
	}
	for _, s := range steps {
		c.ok(append([]string{"partner", "set", "acme"}, s.args...)...)
		for k, v := range s.change {
			want[k] = v
		}
		check("partner set " + strings.Join(s.args, " "))
	}

	bad := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"partner", "set", "acme"}, 2, "at least one setting"},
		{[]string{"partner", "set"}, 2, "one partner ID"},
		{[]string{"partner", "set", "acme", "--mode", "some"}, 2, "--mode"},
		{[]string{"partner", "set", "acme", "--unknown-employee", "ignore"}, 2, "create, reject or hold"},
		{[]string{"partner", "set", "acme", "--currency", "EURO", "--name", "changed"}, 2, "ISO 4217"},
		{[]string{"partner", "set", "acme", "--delimiter", ":"}, 2, "--delimiter"},
		{[]string{"partner", "set", "acme", "--date-format", "DD/MM/YY"}, 2, "--date-format"},
		{[]string{"partner", "set", "acme", "--file-pattern", "a(?P<seq>[a-z]+)"}, 2, "digits only"},
		{[]string{"partner", "set", "acme", "--decimal-comma=maybe"}, 2, "true or false"},
		{[]string{"partner", "set", "acme", "--pgp", "sometimes"}, 2, "off, accept or require"},
		{[]string{"partner", "set", "acme", "--pgp-key", c.file("junk.asc", "not a key\n")}, 1, "junk.asc"},
		{[]string{"partner", "set", "acme", "--allow-from", "10.0.0.1/8"}, 2, "did you mean 10.0.0.0/8"},
		{[]string{"partner", "set", "acme", "--allow-from", "office.example.com"}, 2, "CIDR range"},
		{[]string{"partner", "set", "nobody", "--name", "x"}, 1, "partner add nobody"},
		{[]string{"partner", "set", "acme", "--authorized-keys", c.file("junk.pub", "not a key\n")}, 1, "junk.pub"},
		{[]string{"partner", "add", "x", "--unknown-employee", "maybe"}, 2, "--unknown-employee"},
	}
	for _, tc := range bad {
		code, _, errs := c.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("payintake %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(tc.args, " "), code, errs, tc.code, tc.says)
		}
	}
	check("after refused changes")

	// The next file reads the new settings.
	c.ok("partner", "set", "plain", "--currency", "usd", "--date-format", "MM/DD/YYYY")
	f := c.file("plain-1.csv", "employee_ref,pay_period,component,amount,pay_date\nE1,2026-11,BASE,10.00,11/30/2026\n")
	if out := c.ok("ingest", "--partner", "plain", f); !strings.Contains(out, "created=1") {
		t.Errorf("changed settings not applied to the next file: %q", out)
	}
}

// TestEmployeesCLI walks the onboarding story of sample-files/README.md.
func TestEmployeesCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	sample := func(name string) string { return filepath.Join("..", "..", "sample-files", name) }
	c.ok("partner", "add", "globex", "--unknown-employee", "reject")
	if out := c.ok("employees", "import", "--partner", "globex", sample("employees.csv")); !strings.Contains(out, "5 mapping(s) added, 0 already there") {
		t.Errorf("import: %q", out)
	}
	if out := c.ok("employees", "import", "--partner", "globex", sample("employees.csv")); !strings.Contains(out, "0 mapping(s) added, 5 already there") {
		t.Errorf("re-import: %q", out)
	}
	var emps []map[string]any
	if err := json.Unmarshal([]byte(c.ok("employees", "list", "--partner", "globex", "--format", "json")), &emps); err != nil {
		t.Fatal(err)
	}
	if len(emps) != 5 || emps[0]["employee_ref"] != "E00101" || emps[0]["employee_id"] != "W-1001" || emps[0]["name"] != "Ana Souza" ||
		emps[4]["name"] != "Émile Laurent" || emps[4]["source"] != "import" {
		t.Errorf("employees list: %v", emps)
	}
	if out := c.ok("employees", "list", "--partner", "globex"); !strings.Contains(out, "EMPLOYEE_REF") || !strings.Contains(out, "W-1003") {
		t.Errorf("employees list table: %q", out)
	}

	// The conflicting file is refused whole, one line per conflict.
	code, _, errs := c.run("employees", "import", "--partner", "globex", sample("employees-conflicts.csv"))
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code != 1 || len(lines) != 4 {
		t.Fatalf("conflicting import: exit %d, stderr %q; want exit 1 and 3 conflicts + 1 summary", code, errs)
	}
	for i, want := range []string{"line 3: employee_ref E00102 is already mapped to employee_id W-1002",
		"line 4: employee_id W-1003 already belongs to employee_ref E00103 of partner globex",
		"line 6: employee_id W-1007 is given to employee_ref E00108 here and to E00107 on line 5",
		"nothing was imported"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("stderr line %d %q; want it to mention %q", i+1, lines[i], want)
		}
	}
	if n := strings.Count(c.ok("employees", "list", "--partner", "globex"), "\n"); n != 6 {
		t.Errorf("a refused import changed the mappings: %d lines listed", n)
	}
	// Invalid lines are listed too, and nothing is imported.
	bad := c.file("bad-employees.csv", "employee_ref,employee_id\nN1,\n1.23E+05,W-9\nN3,W-3\n")
	code, _, errs = c.run("employees", "import", "--partner", "globex", bad)
	if code != 1 || !strings.Contains(errs, "line 2: employee_id is empty") || !strings.Contains(errs, "line 3: employee_ref") || !strings.Contains(errs, "2 invalid line(s)") {
		t.Errorf("invalid import: exit %d, stderr %q", code, errs)
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"employees", "import", sample("employees.csv")}, 2, "--partner"},
		{[]string{"employees", "list"}, 2, "--partner"},
		{[]string{"employees", "import", "--partner", "nobody", sample("employees.csv")}, 1, "partner add nobody"},
		{[]string{"employees", "import", "--partner", "globex", c.file("nohead.csv", "ref,id\nE1,W\n")}, 1, "no employee_ref column"},
		{[]string{"employees", "frob"}, 2, "import or list"},
	} {
		if code, _, errs := c.run(tc.args...); code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("payintake %s: exit %d, stderr %q; want %d mentioning %q", strings.Join(tc.args, " "), code, errs, tc.code, tc.says)
		}
	}

	// With --unknown-employee reject, onboarded employees' rows apply and a
	// new one (E00106) is rejected with unknown_employee.
	results := filepath.Join(c.dir, "results")
	if out := c.ok("ingest", "--partner", "globex", sample("clean-first-run.csv")); !strings.Contains(out, "created=8") {
		t.Errorf("clean run: %q", out)
	}
	out := c.ok("ingest", "--partner", "globex", "--results-dir", results, sample("corrected-resubmission.csv"))
	if !strings.Contains(out, "updated=1") || !strings.Contains(out, "rejected=1") {
		t.Errorf("corrected run: %q", out)
	}
	res, err := os.ReadFile(filepath.Join(results, "corrected-resubmission.result.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res), ",rejected,E00106,2026-11,BASE,3900.00,USD,unknown_employee,employee_ref,\"employee E00106 is not onboarded") {
		t.Errorf("result file: %s", res)
	}

	// With hold, the reviewer sees the employee_id approval would give and
	// approving onboards the employee.
	c.ok("partner", "set", "globex", "--unknown-employee", "hold")
	c.ok("ingest", "--partner", "globex", c.file("pay-3.csv", "employee_ref,pay_period,component,amount,currency\nE00107,2026-11,BASE,10.00,USD\n"))
	sum := sha256.Sum256([]byte("globex:E00107"))
	derived := "emp_" + hex.EncodeToString(sum[:])[:20]
	var xs []map[string]any
	if err := json.Unmarshal([]byte(c.ok("review", "list", "--partner", "globex", "--format", "json")), &xs); err != nil {
		t.Fatal(err)
	}
	if len(xs) != 1 || xs[0]["code"] != "unknown_employee" || xs[0]["employee_id"] != derived || xs[0]["employee_ref"] != "E00107" {
		t.Fatalf("review list: %v", xs)
	}
	id := fmt.Sprint(xs[0]["id"])
	if out := c.ok("review", "show", id); !strings.Contains(out, "employee E00107 (employee_id "+derived+")") {
		t.Errorf("review show: %q", out)
	}
	c.ok("review", "approve", id, "--reviewer", "rita")
	if out := c.ok("employees", "list", "--partner", "globex"); !strings.Contains(out, derived) {
		t.Errorf("approval did not onboard E00107 as %s: %q", derived, out)
	}
}
