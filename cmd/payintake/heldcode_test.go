package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// TestHeldCodeCLI: a profile with unknown_component: hold is set; the
// check of a sample says a row of a code it lacks would be held; the file
// holds it; `review approve` refuses it without --as-component and
// applies it with one; `profile show` lists what the code means; and the
// partner's export sent again is unchanged.
func TestHeldCodeCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	c.ok("partner", "add", "acme", "--name", "Acme")
	const yaml = "components:\n  REG: BASE\nunknown_component: hold\n"
	if out := c.ok("partner", "profile", "set", "acme", c.file("acme.yaml", yaml)); !strings.Contains(out, "profile version 1") {
		t.Fatalf("set: %q", out)
	}
	export := "employee_ref,pay_period,component,amount,currency\nE1,2026-11,REG,100.00,USD\nE1,2026-11,XMAS,25.00,USD\n"
	text := c.ok("partner", "profile", "check", "acme", c.file("sample.csv", export))
	for _, want := range []string{"held     unknown_component", `component code "XMAS" has no mapping in partner profile acme (version 1)`, "2 rows: created 1, held 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("check lacks %q:\n%s", want, text)
		}
	}
	if out := c.ok("ingest", "--partner", "acme", c.file("nov.csv", export)); !strings.Contains(out, "created=1 ") || !strings.Contains(out, "held=1") {
		t.Fatalf("ingest: %q", out)
	}
	var xs []map[string]any
	if err := json.Unmarshal([]byte(c.ok("review", "list", "--status", "open", "--format", "json")), &xs); err != nil || len(xs) != 1 {
		t.Fatalf("review list: %v %v", xs, err)
	}
	id := fmt.Sprint(xs[0]["id"])
	if xs[0]["code"] != "unknown_component" || xs[0]["partner_code"] != "XMAS" {
		t.Errorf("listed %v", xs[0])
	}
	if out := c.ok("review", "show", id); !strings.Contains(out, "approve with --as-component COMPONENT") {
		t.Errorf("show: %s", out)
	}
	if code, _, errs := c.run("review", "approve", id, "--reviewer", "rita"); code != 1 || !strings.Contains(errs, "approve it with the component the code means (CLI --as-component") {
		t.Fatalf("approve without a component: %d %q", code, errs)
	}
	if out := c.ok("review", "approve", id, "--reviewer", "rita", "--as-component", "BONUS"); out != "exception "+id+" approved by rita\n" {
		t.Fatalf("approve: %q", out)
	}
	shown := c.ok("partner", "profile", "show", "acme")
	if !strings.Contains(shown, yaml) || !strings.Contains(shown, "#   XMAS: BONUS  (exception "+id+", approved by rita at ") {
		t.Errorf("show: %s", shown)
	}
	if out := c.ok("ingest", "--partner", "acme", c.file("nov-again.csv", export)); !strings.Contains(out, "created=0 updated=0 unchanged=2 ") {
		t.Errorf("the export sent again: %q", out)
	}
}
