package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// csvFieldCases is the result file's cell quoting written out: each cell and
// how it stands in the file. undecided marks a cell whose quoting depends on
// the database's locale (a non-ASCII first or last character, which may or
// may not be white space there): Go leaves it to csv_field, run with the
// database's own collation when the row is processed; want is the answer
// under the C collation, where only ASCII is white space.
var csvFieldCases = []struct {
	in, want  string
	undecided bool
}{
	{in: "", want: ""}, {in: "E001", want: "E001"}, {in: "4000.00", want: "4000.00"},
	{in: "a,b", want: `"a,b"`}, {in: `say "hi"`, want: `"say ""hi"""`}, {in: `"`, want: `""""`},
	{in: "two\nlines", want: "\"two\nlines\""}, {in: "cr\rhere", want: "\"cr\rhere\""},
	{in: "crlf\r\n", want: "\"crlf\r\n\""},
	{in: " lead", want: `" lead"`}, {in: "trail ", want: `"trail "`}, {in: "\tx", want: "\"\tx\""},
	{in: "x\t", want: "\"x\t\""}, {in: "\vx", want: "\"\vx\""}, {in: "x\f", want: "\"x\f\""},
	{in: " ", want: `" "`}, {in: "in side", want: "in side"}, {in: "tab\tinside", want: "tab\tinside"},
	{in: "'=1+1", want: "'=1+1"}, {in: "back\\slash", want: "back\\slash"}, {in: ";|", want: ";|"},
	{in: "\x01ctl", want: "\x01ctl"}, {in: "\x7f", want: "\x7f"},
	// Non-ASCII inside a cell never decides anything.
	{in: "Müller", want: "Müller"}, {in: "a\u00a0b", want: "a\u00a0b"}, {in: "a\u3000b", want: "a\u3000b"},
	{in: "x,\u00e9", want: "\"x,\u00e9\"", undecided: true},
	// Non-ASCII at an edge: the locale decides in SQL.
	{in: "é", want: "é", undecided: true}, {in: "Zoë", want: "Zoë", undecided: true},
	{in: "\U0001f600", want: "\U0001f600", undecided: true},
	// Locale-sensitive white space at an edge: NBSP, em space, ideographic
	// space, line separator, NEL.
	{in: "\u00a0E1", want: "\u00a0E1", undecided: true}, {in: "E1\u2003", want: "E1\u2003", undecided: true},
	{in: "\u3000", want: "\u3000", undecided: true}, {in: "a\u2028", want: "a\u2028", undecided: true},
	{in: "\u0085x", want: "\u0085x", undecided: true},
}

// TestCSVFieldMatchesAppendResultCells: the result file's cells are quoted
// in Go (normalize.AppendResultCells, while rows are staged) or in SQL
// (csv_field, for what Go leaves undecided, the messages and the review
// report). Both give the written-out answers above, and agree on every
// ASCII character at the start, end and middle of a cell and on every code
// point inside one; Go decides no cell with a non-ASCII edge.
func TestCSVFieldMatchesAppendResultCells(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Store(t).Pool()
	n := 0
	var byLocale []string
	for _, tc := range csvFieldCases {
		coll := ""
		if tc.undecided {
			coll = ` COLLATE "C"`
			byLocale = append(byLocale, fmt.Sprintf("%q→%q", tc.in, csvField(ctx, t, db, tc.in, "")))
		}
		if got := csvField(ctx, t, db, tc.in, coll); got != tc.want {
			t.Errorf("csv_field(%q%s) = %q, want %q", tc.in, coll, got, tc.want)
		}
		got, ok := normalize.AppendResultCells(nil, tc.in)
		switch {
		case ok == tc.undecided:
			t.Errorf("AppendResultCells(%q) decided = %v, want %v", tc.in, ok, !tc.undecided)
		case ok && string(got) != tc.want:
			t.Errorf("AppendResultCells(%q) = %q, want %q", tc.in, got, tc.want)
		case !ok && len(got) != 0:
			t.Errorf("AppendResultCells(%q) undecided but appended %q", tc.in, got)
		}
		n++
	}

	// Several cells make one line, as classify's concat_ws of csv_field.
	cells := []string{"E 1", "2026-11", "BASE,X", `12"5`, "USD"}
	var want string
	if err := db.QueryRow(ctx, `SELECT concat_ws(',', csv_field($1), csv_field($2), csv_field($3), csv_field($4), csv_field($5))`,
		cells[0], cells[1], cells[2], cells[3], cells[4]).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if got, ok := normalize.AppendResultCells([]byte("7,6,created,"), cells...); !ok || string(got) != "7,6,created,"+want {
		t.Errorf("AppendResultCells(%q) = %q, %v; csv_field gives %q", cells, got, ok, want)
	}
	if got, ok := normalize.AppendResultCells([]byte("k"), "a", "é"); ok || string(got) != "k" {
		t.Errorf("a line with one undecided cell: got %q, %v; want the buffer unchanged and false", got, ok)
	}

	// Every ASCII character alone, first, last and in the middle.
	var inputs []string
	for c := 1; c < utf8.RuneSelf; c++ {
		s := string(rune(c))
		inputs = append(inputs, s, s+"x", "x"+s, "x"+s+"x")
	}
	// Every code point (bar a few thousand of the astral planes, to keep
	// the query short) in the middle of a cell.
	for r := rune(0x80); r <= 0x10FFFF; r += 1 + r/0x2000 {
		if utf8.ValidRune(r) {
			inputs = append(inputs, "x"+string(r)+"x")
		}
	}
	sql := texts(ctx, t, db, len(inputs), "csv_field",
		`SELECT csv_field(v) FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i) ORDER BY i`, inputs)
	for i, in := range inputs {
		got, ok := normalize.AppendResultCells(nil, in)
		if !ok {
			t.Errorf("AppendResultCells(%q) left an ASCII-edged cell undecided", in)
		} else if string(got) != sql[i] {
			t.Errorf("AppendResultCells(%q) = %q, csv_field gives %q", in, got, sql[i])
		}
	}
	t.Logf("SUMMARY csv-field: %d written-out cases and %d generated cells: Go and SQL agree; the database's own collation quotes the locale-dependent ones as %s",
		n, len(inputs), strings.Join(byLocale, " "))
}

func csvField(ctx context.Context, t *testing.T, db *pgxpool.Pool, v, collate string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(ctx, `SELECT csv_field($1::text`+collate+`)`, v).Scan(&s); err != nil {
		t.Fatal(fmt.Errorf("csv_field(%q): %w", strings.ToValidUTF8(v, "?"), err))
	}
	return s
}

// TestResultHeaderMatches: the result file's header is written by Go
// (normalize.ResultHeader, passed to the processing SQL) and, in review
// reports, by the database (review_report_csv, which has
// no exception to report for envelope 0: the header alone).
func TestResultHeaderMatches(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Store(t).Pool()
	var sql string
	if err := db.QueryRow(ctx, `SELECT convert_from(review_report_csv(0), 'UTF8')`).Scan(&sql); err != nil {
		t.Fatal(err)
	}
	if sql != normalize.ResultHeader {
		t.Errorf("review_report_csv's header = %q, normalize.ResultHeader = %q", sql, normalize.ResultHeader)
	}
	// The five echoed columns are the first five canonical fields.
	if want := "line,row,outcome," + strings.Join(normalize.FieldNames[:5], ",") + ",code,field,message\n"; normalize.ResultHeader != want {
		t.Errorf("normalize.ResultHeader = %q, want %q", normalize.ResultHeader, want)
	}
}
