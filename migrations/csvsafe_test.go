package migrations_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// csvSafeCases is the rule of normalize.SafeCell (result files) and csv_safe
// (review reports, SQL) written out: each value and what both must give.
var csvSafeCases = []struct{ in, want string }{
	{"", ""}, {"E001", "E001"}, {"=SUM(A1)", "'=SUM(A1)"}, {"+1", "+1"}, {"-5", "-5"},
	{"-12,50", "-12,50"}, {"+3.25", "+3.25"}, {"-1e3", "'-1e3"}, {"@x", "'@x"},
	{"\tx", "'\tx"}, {"\rx", "'\rx"}, {"\t-5", "'\t-5"}, {"-", "'-"}, {"+", "'+"},
	{"1-2", "1-2"}, {"-12,", "'-12,"}, {"--1", "'--1"}, {"=1+1", "'=1+1"},
	{"-0012", "-0012"}, {"+1.2.3", "'+1.2.3"}, {"5=5", "5=5"}, {"x =1", "x =1"},
	// Leading whitespace and control characters before the formula.
	{" =1+1", "' =1+1"}, {"   @SUM(A1)", "'   @SUM(A1)"}, {"\n=1+1", "'\n=1+1"},
	{"\v+cmd", "'\v+cmd"}, {"\f-x", "'\f-x"}, {"\x01=1", "'\x01=1"}, {"\x7f=1", "'\x7f=1"},
	{"\u0085=1", "'\u0085=1"},                                          // NEL, a C1 control
	{"\u00a0=1+1", "'\u00a0=1+1"},                                      // NBSP
	{"\u2007=1", "'\u2007=1"},                                          // figure space
	{"\u202f@x", "'\u202f@x"},                                          // narrow NBSP
	{"\u3000=1", "'\u3000=1"},                                          // ideographic space
	{"\u1680=1", "'\u1680=1"},                                          // ogham space mark
	{"\u200b=1", "'\u200b=1"},                                          // zero-width space
	{"\ufeff=1", "'\ufeff=1"},                                          // byte order mark
	{"\u202e=1", "'\u202e=1"},                                          // right-to-left override
	{"\u2066\u200d =1", "'\u2066\u200d =1"},                            // isolate, zero-width joiner, space
	{"\U000e0020=1", "'\U000e0020=1"},                                  // tag space, 4 bytes
	{" \u00a0\n\t=1", "' \u00a0\n\t=1"},                                // a mixed run
	{" -5", " -5"}, {"\u00a0-12,50", "\u00a0-12,50"}, {"\n+1", "\n+1"}, // numbers after the run
	{" ", " "}, {"\u00a0", "\u00a0"}, {" \n", " \n"}, // only blanks
	// Not blank: letters, symbols, look-alikes of = and - are left alone.
	{"é=1", "é=1"}, {"\U0001f600=1", "\U0001f600=1"}, {"\uff1d1+1", "\uff1d1+1"}, {"\u2212" + "5", "\u22125"},
	{"_=1", "_=1"}, {"'=1", "'=1"},
}

// TestCSVSafeMatchesSafeCell: the review report escapes values in SQL
// (csv_safe), the result file in Go (normalize.SafeCell). Both give the
// written-out answers above, and both agree on every Unicode code point put
// in front of "=1", under every collation the database offers a UTF-8
// locale-sensitive one of (the characters are listed code point for code
// point, so no locale may change them).
func TestCSVSafeMatchesSafeCell(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	for _, tc := range csvSafeCases {
		var got string
		if err := st.Pool().QueryRow(ctx, `SELECT csv_safe($1)`, tc.in).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("csv_safe(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := normalize.SafeCell(tc.in); got != tc.want {
			t.Errorf("SafeCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}

	// Go: which code points, in front of "=1", make the value escaped.
	var goEscaped []int32
	for r := rune(1); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		if v := string(r) + "=1"; normalize.SafeCell(v) != v {
			goEscaped = append(goEscaped, r)
		}
	}
	collations := []string{`"C"`, `"default"`, `"POSIX"`}
	rows, err := st.Pool().Query(ctx, `SELECT quote_ident(collname) FROM pg_collation
		WHERE collname IN ('C.utf8', 'C.UTF-8', 'en_US.utf8', 'de_DE.utf8', 'und-x-icu', 'en-x-icu', 'tr-x-icu')
		AND collencoding IN (-1, pg_char_to_encoding('UTF8'))`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		collations = append(collations, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Every code point under the database's own collation; under the others
	// (a sweep costs seconds each), the planes where blanks live.
	const everyCodePoint = `(SELECT i FROM generate_series(1, 1114111) i WHERE i < 55296 OR i > 57343)`
	const blankPlanes = `(SELECT i FROM generate_series(1, 12543) i UNION ALL SELECT generate_series(65024, 65535)
		UNION ALL SELECT generate_series(69792, 69887) UNION ALL SELECT generate_series(78896, 78911)
		UNION ALL SELECT generate_series(113824, 113827) UNION ALL SELECT generate_series(119155, 119162)
		UNION ALL SELECT generate_series(917504, 917631))`
	for _, coll := range collations {
		points, want := blankPlanes, goEscaped
		if coll == `"default"` {
			points = everyCodePoint
		}
		var sqlEscaped []int32
		err := st.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(array_agg(i ORDER BY i), '{}')
			FROM %s AS p(i) WHERE csv_safe((chr(i) || '=1') COLLATE %s) <> chr(i) || '=1'`, points, coll)).Scan(&sqlEscaped)
		if err != nil {
			t.Fatalf("collation %s: %v", coll, err)
		}
		if !slices.Equal(want, sqlEscaped) {
			t.Errorf("collation %s: csv_safe escapes %d code points before \"=1\", SafeCell %d; only in SQL: %U; only in Go: %U",
				coll, len(sqlEscaped), len(goEscaped), minus(sqlEscaped, goEscaped), minus(goEscaped, sqlEscaped))
		}
	}
	t.Logf("SUMMARY csv-safe: %d written-out cases; Go and SQL agree on all %d code points in front of \"=1\" (%d escaped) under the database's collation, and on the planes holding blanks under %v",
		len(csvSafeCases), 0x10FFFF-0x800, len(goEscaped), collations)
}

// Every Unicode whitespace, control and format character (as Go's tables
// know them) is in normalize.FormulaLead: a newer Unicode adding one makes
// this fail, and both lists are extended together.
func TestFormulaLeadCoversBlanks(t *testing.T) {
	for _, tab := range []*unicode.RangeTable{unicode.White_Space, unicode.Cc, unicode.Cf} {
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if unicode.Is(tab, r) && !unicode.Is(normalize.FormulaLead, r) {
				t.Errorf("%U is blank or invisible but not in normalize.FormulaLead (add it there and in csv_safe)", r)
			}
		}
	}
}

func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	if len(out) > 20 {
		out = out[:20]
	}
	return out
}
