package migrations_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// resultLineCase is a result line written out: its line and row, outcome,
// the eight cells (employee_ref .. currency, code, field, message) and the
// line both rules must give. undecided marks a line with a cell whose
// quoting depends on the database's locale (a non-ASCII first or last
// character): Go leaves it to SQL; want is SQL's answer under the C
// collation, where only ASCII is white space.
type resultLineCase struct {
	name      string
	line, row int
	outcome   string
	cells     [8]string
	want      string
	undecided bool
}

var resultLineCases = []resultLineCase{
	{name: "plain", line: 2, row: 1, outcome: "created",
		cells: [8]string{"E00101", "2026-11", "BASE", "4000.00", "USD"},
		want:  "2,1,created,E00101,2026-11,BASE,4000.00,USD,,,"},
	{name: "all empty", line: 0, row: 0, outcome: "rejected", want: "0,0,rejected,,,,,,,,"},
	{name: "file rejected", line: 1, row: 0, outcome: "rejected",
		cells: [8]string{5: "missing_column", 6: "amount", 7: "the header has no amount column: add it"},
		want:  "1,0,rejected,,,,,,missing_column,amount,the header has no amount column: add it"},
	{name: "only a message", line: 7, row: 6, outcome: "rejected", cells: [8]string{7: "x"},
		want: "7,6,rejected,,,,,,,,x"},
	{name: "only a field", line: 7, row: 6, outcome: "held", cells: [8]string{6: "amount"},
		want: "7,6,held,,,,,,,amount,"},
	{name: "commas", line: 4, row: 3, outcome: "rejected",
		cells: [8]string{"E1", "2026-11", "BASE,X", "1,234.50", "USD", "too_many_decimals", "amount", "amount \"1,234.505\" has 3 decimals"},
		want:  `4,3,rejected,E1,2026-11,"BASE,X","1,234.50",USD,too_many_decimals,amount,"amount ""1,234.505"" has 3 decimals"`},
	{name: "quotes", line: 9, row: 8, outcome: "updated",
		cells: [8]string{`"`, `say "hi"`, `""`, "1", "EUR"},
		want:  `9,8,updated,"""","say ""hi""","""""",1,EUR,,,`},
	{name: "CR LF", line: 3, row: 2, outcome: "rejected",
		cells: [8]string{"two\nlines", "cr\rhere", "crlf\r\n", "1", "USD", "bad", "", "a\r\nb"},
		want:  "3,2,rejected,\"two\nlines\",\"cr\rhere\",\"crlf\r\n\",1,USD,bad,,\"a\r\nb\""},
	{name: "ASCII white space at an edge", line: 5, row: 4, outcome: "unchanged",
		cells: [8]string{" E1", "2026-11 ", "\tBASE", "1\v", "\fUSD", "in side", "tab\tinside", " "},
		want:  "5,4,unchanged,\" E1\",\"2026-11 \",\"\tBASE\",\"1\v\",\"\fUSD\",in side,tab\tinside,\" \""},
	{name: "non-ASCII inside", line: 6, row: 5, outcome: "created",
		cells: [8]string{"Müller", "a\u00a0b", "a\u3000b", "1", "USD", "", "", "employee Zoë Ünal is not onboarded"},
		want:  "6,5,created,Müller,a\u00a0b,a\u3000b,1,USD,,,employee Zoë Ünal is not onboarded"},
	// A formula-looking value is written as given: escaping is SafeCell's
	// (csv_safe's), applied before; see the formula cases below.
	{name: "formula cells as given", line: 8, row: 7, outcome: "rejected",
		cells: [8]string{"=1+1", "+cmd", "-x", "@SUM(A1)", "'=1", "c", "f", "=HYPERLINK(\"x\")"},
		want:  `8,7,rejected,=1+1,+cmd,-x,@SUM(A1),'=1,c,f,"=HYPERLINK(""x"")"`},
	{name: "large numbers", line: 1 << 30, row: 1<<30 - 1, outcome: "stale",
		cells: [8]string{"E", "P", "C", "-0.01", "JPY", "superseded", "", "m"},
		want:  "1073741824,1073741823,stale,E,P,C,-0.01,JPY,superseded,,m"},
	// Non-ASCII at an edge: the locale decides in SQL.
	{name: "non-ASCII first", line: 2, row: 1, outcome: "created",
		cells: [8]string{"é", "2026-11", "BASE", "1", "USD"}, undecided: true,
		want: "2,1,created,é,2026-11,BASE,1,USD,,,"},
	{name: "NBSP first", line: 2, row: 1, outcome: "created",
		cells: [8]string{"\u00a0E1", "2026-11", "BASE", "1", "USD"}, undecided: true,
		want: "2,1,created,\u00a0E1,2026-11,BASE,1,USD,,,"},
	{name: "em space last, with a comma", line: 2, row: 1, outcome: "held",
		cells: [8]string{"E1", "2026-11", "BASE", "1", "USD", "record_locked", "", "x,\u2003"}, undecided: true,
		want: "2,1,held,E1,2026-11,BASE,1,USD,record_locked,,\"x,\u2003\""},
	{name: "ideographic space, line separator, NEL", line: 2, row: 1, outcome: "rejected",
		cells: [8]string{"\u3000", "a\u2028", "\u0085x", "1", "USD"}, undecided: true,
		want: "2,1,rejected,\u3000,a\u2028,\u0085x,1,USD,,,"},
	{name: "emoji last", line: 2, row: 1, outcome: "created",
		cells: [8]string{"E1", "2026-11", "BONUS \U0001f600", "1", "USD"}, undecided: true,
		want: "2,1,created,E1,2026-11,BONUS \U0001f600,1,USD,,,"},
}

// TestResultLineMatchesAppendResultLine: every line of a result file is
// written by the SQL function result_line (classify's rows, a rejected
// file's row 0, the review report), whose Go twin is
// normalize.AppendResultLine. Each case above is run through Go and through
// SQL three ways: with every empty cell as an empty string and as NULL, and as classify
// calls it, with the five echoed cells pre-quoted by
// normalize.AppendResultCells while staging. Then every ASCII character
// alone, first, last and inside each cell, and formula values escaped by
// normalize.SafeCell in Go and csv_safe in SQL.
func TestResultLineMatchesAppendResultLine(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Store(t).Pool()

	// The function must stay inlinable (no slower than the expression it
	// replaced in classify): a plan that calls it shows no call to it.
	var plan string
	if err := db.QueryRow(ctx, `EXPLAIN (VERBOSE, FORMAT JSON) SELECT result_line(l, 1, 'created', NULL, 'a', 'b', 'c', 'd', 'e', NULL, NULL, NULL)
		FROM generate_series(1, 2) l`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "result_line") || strings.Contains(plan, "csv_field") {
		t.Errorf("result_line is not inlined; the plan's output: %s", plan)
	}

	in := slices.Clone(resultLineCases)
	// Every ASCII character alone, first, last and inside each cell.
	for i := 0; i < 8; i++ {
		for c := 1; c < utf8.RuneSelf; c++ {
			s := string(rune(c))
			for _, v := range []string{s, s + "x", "x" + s, "x" + s + "x"} {
				tc := resultLineCase{name: fmt.Sprintf("cell %d %q", i, v), line: c, row: i, outcome: "held",
					cells: [8]string{"E1", "2026-11", "BASE", "1.00", "USD", "c", "f", "m"}}
				tc.cells[i] = v
				in = append(in, tc)
			}
		}
	}

	type variant struct {
		name    string
		nulls   bool // an empty cell passed as NULL
		staged  bool // the five echoed cells pre-quoted in Go
		collate string
	}
	variants := []variant{{name: "empty"}, {name: "NULL", nulls: true}, {name: "staged", staged: true}}
	n := 0
	for _, v := range variants {
		for _, collate := range []string{"", ` COLLATE "C"`} {
			v.collate = collate
			var cases []resultLineCase
			for _, tc := range in {
				if tc.undecided == (collate != "") && !(tc.undecided && v.staged) {
					cases = append(cases, tc)
				}
			}
			got := resultLines(ctx, t, db, cases, v.nulls, v.staged, collate)
			for i, tc := range cases {
				want := tc.want
				if want == "" {
					want = goLine(t, tc)
				}
				if got[i] != want {
					t.Errorf("%s (%s%s): result_line = %q, want %q", tc.name, v.name, collate, got[i], want)
				}
				n++
			}
		}
	}
	for _, tc := range in {
		got, ok := normalize.AppendResultLine([]byte("k"), tc.line, tc.row, tc.outcome, tc.cells)
		switch {
		case ok == tc.undecided:
			t.Errorf("%s: AppendResultLine decided = %v, want %v", tc.name, ok, !tc.undecided)
		case ok && tc.want != "" && string(got) != "k"+tc.want:
			t.Errorf("%s: AppendResultLine = %q, want %q", tc.name, got, "k"+tc.want)
		case !ok && string(got) != "k":
			t.Errorf("%s: undecided but AppendResultLine appended %q", tc.name, got)
		}
	}

	// Formula values: a result file's echoed cells are escaped by SafeCell
	// in Go (intake.Stage), a review report's by csv_safe in SQL; either
	// way the line is the same.
	var formulas []resultLineCase
	for _, c := range csvSafeCases {
		if !edgeDecided(c.in) {
			continue
		}
		tc := resultLineCase{name: fmt.Sprintf("formula %q", c.in), line: 3, row: 2, outcome: "approved",
			cells: [8]string{c.in, "2026-11", c.in, "1", "USD", "", "", c.in}}
		formulas = append(formulas, tc)
	}
	got := resultLines(ctx, t, db, formulas, false, false, "", 0, 2, 7)
	for i, tc := range formulas {
		esc := tc
		for _, j := range []int{0, 2, 7} {
			esc.cells[j] = normalize.SafeCell(tc.cells[j])
		}
		if want := goLine(t, esc); got[i] != want {
			t.Errorf("%s: result_line of csv_safe = %q, AppendResultLine of SafeCell = %q", tc.name, got[i], want)
		}
		n++
	}
	if t.Failed() {
		return
	}
	t.Logf("SUMMARY result-line: %d lines (%d written out, %d generated, %d formula) through SQL and Go: the same bytes",
		n, len(resultLineCases), len(in)-len(resultLineCases), len(formulas))
}

// edgeDecided tells whether Go decides the quoting of SafeCell(v), the
// cell both sides write for v.
func edgeDecided(v string) bool {
	_, ok := normalize.AppendResultCells(nil, normalize.SafeCell(v))
	return ok
}

// goLine is AppendResultLine's line of tc, which must be decided.
func goLine(t *testing.T, tc resultLineCase) string {
	t.Helper()
	b, ok := normalize.AppendResultLine(nil, tc.line, tc.row, tc.outcome, tc.cells)
	if !ok {
		t.Fatalf("%s: AppendResultLine left the line undecided", tc.name)
	}
	return string(b)
}

// resultLines runs result_line over cases in one query and returns its
// lines in order. nulls passes an empty cell as NULL; staged passes the five echoed
// cells pre-quoted as Go's AppendResultCells quotes them while staging;
// collate is added to every cell; the cells numbered in safe are passed
// through csv_safe first.
func resultLines(ctx context.Context, t *testing.T, db *pgxpool.Pool, cases []resultLineCase, nulls, staged bool, collate string, safe ...int) []string {
	t.Helper()
	lines, rows := make([]int32, len(cases)), make([]int32, len(cases))
	outcomes, echoed := make([]*string, len(cases)), make([]*string, len(cases))
	var cells [8][]*string
	for i, tc := range cases {
		lines[i], rows[i], outcomes[i] = int32(tc.line), int32(tc.row), &tc.outcome
		if staged {
			b, ok := normalize.AppendResultCells(nil, tc.cells[:5]...)
			if !ok {
				t.Fatalf("%s: staged, but AppendResultCells cannot quote %q", tc.name, tc.cells[:5])
			}
			e := string(b)
			echoed[i] = &e
		}
		for j := range cells {
			v := tc.cells[j]
			if v == "" && nulls {
				cells[j] = append(cells[j], nil)
			} else {
				cells[j] = append(cells[j], &v)
			}
		}
	}
	args := []any{lines, rows, outcomes, echoed}
	var exprs, cols []string
	for j := range cells {
		args = append(args, cells[j])
		e := fmt.Sprintf("(c%d%s)", j, collate)
		if slices.Contains(safe, j) {
			e = "csv_safe" + e
		}
		exprs = append(exprs, e)
		cols = append(cols, fmt.Sprintf("c%d", j))
	}
	q := `SELECT result_line(l, r, o, e, ` + strings.Join(exprs, ", ") + `)
	FROM unnest($1::integer[], $2::integer[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::text[], $10::text[], $11::text[], $12::text[]) WITH ORDINALITY AS u(l, r, o, e, ` + strings.Join(cols, ", ") + `, i)
	ORDER BY i`
	return texts(ctx, t, db, len(cases), "result_line", q, args...)
}
