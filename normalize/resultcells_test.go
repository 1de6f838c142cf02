package normalize_test

import (
	"testing"
	"unicode"

	"github.com/payintake/payintake/normalize"
)

// csvSafeCases is the rule of normalize.SafeCell (result files and review
// reports) written out: each value and what it must give.
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

func TestSafeCellCases(t *testing.T) {
	for _, tc := range csvSafeCases {
		if got := normalize.SafeCell(tc.in); got != tc.want {
			t.Errorf("SafeCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Every Unicode whitespace, control and format character (as Go's tables
// know them) is in normalize.FormulaLead: a newer Unicode adding one makes
// this fail, and the list is extended.
func TestFormulaLeadCoversBlanks(t *testing.T) {
	for _, tab := range []*unicode.RangeTable{unicode.White_Space, unicode.Cc, unicode.Cf} {
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if unicode.Is(tab, r) && !unicode.Is(normalize.FormulaLead, r) {
				t.Errorf("%U is blank or invisible but not in normalize.FormulaLead", r)
			}
		}
	}
}

// resultCellCases is the result file's cell quoting written out: each cell
// and how it stands in a line. White space at an edge is IsResultSpace's:
// PostgreSQL's \s under C.UTF-8, which quoted every result file before Go
// wrote them all (the no-break spaces and NEL are not white space there).
var resultCellCases = []struct{ in, want string }{
	{"", ""}, {"E001", "E001"}, {"4000.00", "4000.00"},
	{"a,b", `"a,b"`}, {`say "hi"`, `"say ""hi"""`}, {`"`, `""""`},
	{"two\nlines", "\"two\nlines\""}, {"cr\rhere", "\"cr\rhere\""}, {"crlf\r\n", "\"crlf\r\n\""},
	{" lead", `" lead"`}, {"trail ", `"trail "`}, {"\tx", "\"\tx\""},
	{"x\t", "\"x\t\""}, {"\vx", "\"\vx\""}, {"x\f", "\"x\f\""},
	{" ", `" "`}, {"in side", "in side"}, {"tab\tinside", "tab\tinside"},
	{"'=1+1", "'=1+1"}, {"back\\slash", "back\\slash"}, {";|", ";|"},
	{"\x01ctl", "\x01ctl"}, {"\x7f", "\x7f"},
	{"Müller", "Müller"}, {"a\u00a0b", "a\u00a0b"}, {"a\u3000b", "a\u3000b"},
	{"x,\u00e9", "\"x,\u00e9\""}, {"é", "é"}, {"Zoë", "Zoë"}, {"\U0001f600", "\U0001f600"},
	// Non-ASCII white space at an edge is quoted ...
	{"\u3000", "\"\u3000\""}, {"a\u2028", "\"a\u2028\""}, {"E1\u2003", "\"E1\u2003\""},
	{"\u1680x", "\"\u1680x\""}, {"x\u2029", "\"x\u2029\""}, {"\u205fx", "\"\u205fx\""},
	{"\u2000x", "\"\u2000x\""}, {"x\u2006", "\"x\u2006\""}, {"\u2008x", "\"\u2008x\""}, {"x\u200a", "\"x\u200a\""},
	// ... but not the no-break spaces, NEL or the zero-width space.
	{"\u00a0E1", "\u00a0E1"}, {"E1\u2007", "E1\u2007"}, {"\u202fx", "\u202fx"}, {"\u0085x", "\u0085x"},
	{"\u200bx", "\u200bx"},
}

func TestAppendResultCells(t *testing.T) {
	for _, tc := range resultCellCases {
		if got := string(normalize.AppendResultCells(nil, tc.in)); got != tc.want {
			t.Errorf("AppendResultCells(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := string(normalize.AppendResultLine(nil, 3, 2, "held", [8]string{"E,1", "2026-11", "BASE", "1.00", "USD", "record_locked", "", "x"})),
		`3,2,held,"E,1",2026-11,BASE,1.00,USD,record_locked,,x`; got != want {
		t.Errorf("AppendResultLine = %q, want %q", got, want)
	}
}
