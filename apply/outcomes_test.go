package apply_test

import (
	"context"
	"encoding/csv"
	"slices"
	"strings"
	"testing"

	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/records"
)

// TestOutcomesOfSQLAreTheGoOutcomes: the processing SQL (classify.go's
// classify) writes each row's outcome as a word; records.Outcome's
// constants are Go's spelling of the same words. Three files that between
// them give every outcome show that each word SQL writes, in the result
// files and in the counts, is one of the constants, and that each constant
// is written.
func TestOutcomesOfSQLAreTheGoOutcomes(t *testing.T) {
	h := applytest.NewWith(t, applytest.Config{})
	const header = "employee_ref,pay_period,component,amount,currency\n"
	want := map[string]map[int]records.Outcome{
		"run-2.csv": {1: records.OutcomeCreated, 2: records.OutcomeCreated, 3: records.OutcomeCreated},
		"run-3.csv": {1: records.OutcomeUnchanged, 2: records.OutcomeUpdated, 3: records.OutcomeHeld, 4: records.OutcomeRejected},
		"run-1.csv": {1: records.OutcomeStale},
	}
	files := []struct {
		name string
		seq  int64
		body string
	}{
		{"run-2.csv", 2, header + "E1,2026-11,BASE,100.00,USD\nE2,2026-11,BASE,200.00,USD\nE3,2026-10,BASE,300.00,USD\n"},
		{"run-3.csv", 3, header + "E1,2026-11,BASE,100.00,USD\nE2,2026-11,BASE,250.00,USD\nE3,2026-10,BASE,350.00,USD\nE4,2026-11,BASE,x,USD\n"},
		{"run-1.csv", 1, header + "E1,2026-11,BASE,999.00,USD\n"},
	}
	seen := map[records.Outcome]bool{}
	for i, file := range files {
		if i == 1 {
			if _, err := h.Store.LockPeriod(context.Background(), h.Partner, "2026-10", records.LockPaid, "tester"); err != nil {
				t.Fatal(err)
			}
		}
		out := h.SendCSV(t, file.body, &file.seq)
		rows := resultRows(t, h.Result(t, out))
		if len(rows) != len(want[file.name]) {
			t.Fatalf("%s: %d result rows, want %d", file.name, len(rows), len(want[file.name]))
		}
		counted := 0
		for k, n := range out.Counts {
			if !slices.Contains(records.Outcomes, records.Outcome(k)) {
				t.Errorf("%s: SQL counted outcome %q, which is not a records.Outcome", file.name, k)
			}
			counted += n
		}
		if counted != len(rows) {
			t.Errorf("%s: counts %v add up to %d, not the %d rows", file.name, out.Counts, counted, len(rows))
		}
		for i, r := range rows {
			o := records.Outcome(r["outcome"])
			if !o.Valid() {
				t.Errorf("%s row %d: SQL wrote outcome %q, which is not a records.Outcome", file.name, i+1, o)
			}
			if w := want[file.name][i+1]; o != w {
				t.Errorf("%s row %d: outcome %q, want %q", file.name, i+1, o, w)
			}
			seen[o] = true
		}
	}
	for _, o := range records.Outcomes {
		if !seen[o] {
			t.Errorf("records.Outcome %q was never written by SQL", o)
		}
	}
	t.Logf("SUMMARY outcomes: %d outcomes, each written by SQL and each a records.Outcome", len(seen))
}

// resultRows parses a result file, each line's cells by the header's names.
func resultRows(t *testing.T, result string) []map[string]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(result)).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("result file is not CSV (%v):\n%s", err, result)
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, name := range rows[0] {
			m[name] = r[i]
		}
		out = append(out, m)
	}
	return out
}
