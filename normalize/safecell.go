package normalize

import (
	"unicode"
	"unicode/utf8"
)

// SafeCell prefixes with ' a value a spreadsheet would run as a formula,
// in result files and review reports. The rule, documented for partners in
// docs/contract.md:
//
//   - a value that starts with a tab or a carriage return is escaped;
//   - otherwise the leading run of blank and invisible characters
//     (FormulaLead: every Unicode White_Space, control and format character,
//     NBSP, U+2000–U+200F, U+202A–U+202E and U+FEFF among them) is skipped,
//     and the value is escaped when what follows starts with = + - or @ and
//     is not a plain number such as "-5", "+1", "-12.50" or "-12,50" (digits
//     with an optional sign and one '.' or ',' decimal part).
//
// Other values are returned unchanged. Escaping is one ' in front of the
// whole value; nothing else changes.
func SafeCell(s string) string {
	if s == "" {
		return s
	}
	if s[0] == '\t' || s[0] == '\r' {
		return "'" + s
	}
	rest := s
	for rest != "" {
		r, n := utf8.DecodeRuneInString(rest)
		if r == utf8.RuneError && n == 1 || !unicode.Is(FormulaLead, r) {
			break
		}
		rest = rest[n:]
	}
	if rest == "" {
		return s
	}
	switch rest[0] {
	case '=', '+', '-', '@':
		if isPlainNumber(rest) {
			return s
		}
		return "'" + s
	}
	return s
}

// FormulaLead holds the characters SafeCell skips before it looks for a
// formula's first character: Unicode White_Space, Cc (controls) and Cf
// (format characters: soft hyphen, zero-width space and joiners, bidi marks,
// embeddings and isolates, byte order mark, tags). The list is explicit, not
// unicode.White_Space and friends, so that a newer Unicode in Go changes no
// result file silently: TestFormulaLeadCoversBlanks fails instead.
var FormulaLead = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x0000, Hi: 0x0020, Stride: 1},
		{Lo: 0x007F, Hi: 0x00A0, Stride: 1},
		{Lo: 0x00AD, Hi: 0x00AD, Stride: 1},
		{Lo: 0x0600, Hi: 0x0605, Stride: 1},
		{Lo: 0x061C, Hi: 0x061C, Stride: 1},
		{Lo: 0x06DD, Hi: 0x06DD, Stride: 1},
		{Lo: 0x070F, Hi: 0x070F, Stride: 1},
		{Lo: 0x0890, Hi: 0x0891, Stride: 1},
		{Lo: 0x08E2, Hi: 0x08E2, Stride: 1},
		{Lo: 0x1680, Hi: 0x1680, Stride: 1},
		{Lo: 0x180E, Hi: 0x180E, Stride: 1},
		{Lo: 0x2000, Hi: 0x200F, Stride: 1},
		{Lo: 0x2028, Hi: 0x202F, Stride: 1},
		{Lo: 0x205F, Hi: 0x2064, Stride: 1},
		{Lo: 0x2066, Hi: 0x206F, Stride: 1},
		{Lo: 0x3000, Hi: 0x3000, Stride: 1},
		{Lo: 0xFEFF, Hi: 0xFEFF, Stride: 1},
		{Lo: 0xFFF9, Hi: 0xFFFB, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x110BD, Hi: 0x110BD, Stride: 1},
		{Lo: 0x110CD, Hi: 0x110CD, Stride: 1},
		{Lo: 0x13430, Hi: 0x1343F, Stride: 1},
		{Lo: 0x1BCA0, Hi: 0x1BCA3, Stride: 1},
		{Lo: 0x1D173, Hi: 0x1D17A, Stride: 1},
		{Lo: 0xE0001, Hi: 0xE0001, Stride: 1},
		{Lo: 0xE0020, Hi: 0xE007F, Stride: 1},
	},
	LatinOffset: 3,
}
