package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
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
		"currency": "", "file_pattern": "", "mode": "all-or-nothing", "unknown_employee": "hold", "target": "", "keys": float64(1)}
	plain := map[string]any{"id": "plain", "name": "", "delimiter": "", "decimal_comma": false, "date_format": "",
		"currency": "", "file_pattern": "", "mode": "row", "unknown_employee": "create", "target": "", "keys": float64(0)}
	check := func(step string) {
		t.Helper()
		for id, w := range map[string]map[string]any{"acme": want, "plain": plain} {
			got := show(id)
			for k, v := range w {
				if got[k] != v {
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
		// Empty values go back to the defaults where the default is "none".
		{[]string{"--delimiter", "", "--date-format", "", "--currency", "", "--file-pattern", ""},
			map[string]any{"delimiter": "", "date_format": "", "currency": "", "file_pattern": ""}},
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
