package review

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/payintake/payintake/records"
)

// formulaPrefixes are what a hostile partner puts before a formula to slip
// it past a check of the first byte.
var formulaPrefixes = []string{"", " ", "   ", "\t", "\r", "\n", "\u00a0", "\u2007", "\u202f", "\u3000",
	"\u200b", "\ufeff", "\u202e", "\u2066", "\x01", "\u0085", " \u00a0\u200b"}

// A partner sends formulas behind leading whitespace and invisible
// characters, in fields echoed raw by the result file (invalid amounts: Go's
// SafeCell) and in valid identifiers that a reviewer then decides (echoed by
// the review report: SafeCell too). No cell of either file may start, after
// its blanks, with = + - or @ unless it is escaped or a plain number.
func TestHostileFormulaAfterBlanks(t *testing.T) {
	f := newFixture(t) // acme's 2024-01 is locked: every row below is held
	var b strings.Builder
	b.WriteString(header)
	w := csv.NewWriter(&b)
	for i, p := range formulaPrefixes {
		_ = w.Write([]string{p + fmt.Sprintf("=HYPERLINK(\"http://x/%d\")", i), "2024-01", "BASE", "10.00", "USD"}) // held
		_ = w.Write([]string{fmt.Sprintf("E9%d", i), "2024-01", "BASE", p + "=1+1", "USD"})                         // rejected: raw echo
		_ = w.Write([]string{fmt.Sprintf("E8%d", i), "2024-01", p + "@SUM(A1)", "10.00", "USD"})                    // held
	}
	w.Flush()
	env := f.ingest("acme", "jan-formulas.csv", b.String())
	n := len(formulaPrefixes)
	if env.Counts["held"] != 2*n || env.Counts["rejected"] != n {
		t.Fatalf("counts %v, want %d held and %d rejected", env.Counts, 2*n, n)
	}
	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: "acme", Status: "open"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		if x.EnvelopeID == env.ID {
			if _, err := f.decide(x.ID, false, "bob", "-no"); err != nil {
				t.Fatal(err)
			}
		}
	}
	var result bytes.Buffer
	if err := f.store.WriteResult(f.ctx, env.ID, &result); err != nil {
		t.Fatal(err)
	}
	report, err := reviewReport(t, f, env.ID)
	if err != nil {
		t.Fatal(err)
	}
	cells, raw := 0, 0
	for name, data := range map[string]string{"result file": result.String(), "review report": report} {
		want := 3 * n
		if name == "review report" {
			want = 2 * n
		}
		rows, err := csv.NewReader(strings.NewReader(data)).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rows) != 1+want {
			t.Fatalf("%s has %d rows, want %d:\n%s", name, len(rows), 1+want, data)
		}
		for _, row := range rows[1:] {
			for _, c := range row[3:8] { // employee_ref … currency: the echoed values
				cells++
				if runsAsFormula(c) {
					raw++
					t.Errorf("%s echoes %q unescaped", name, c)
				}
			}
		}
	}
	if escaped := strings.Count(result.String(), "'") + strings.Count(report, "'"); escaped < 5*n {
		t.Errorf("%d escaped cells, want at least %d", escaped, 5*n)
	}
	t.Logf("SUMMARY formula-after-blanks: %d prefixes × 3 fields; %d echoed cells in the result file and the review report, %d run as a formula", n, cells, raw)
}

// runsAsFormula: after any leading blanks or invisible characters, the cell
// starts with = + - or @ and is not a plain number, and it is not escaped.
func runsAsFormula(c string) bool {
	if strings.HasPrefix(c, "'") {
		return false
	}
	rest := strings.TrimLeftFunc(c, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
	})
	if rest == "" || !strings.ContainsRune("=+-@", rune(rest[0])) {
		return false
	}
	return !plainNumber.MatchString(rest)
}

var plainNumber = regexp.MustCompile(`^[+-]?[0-9]+([.,][0-9]+)?$`)
