package normalize

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/text/currency"
)

// Settings are a partner's file conventions. The zero value means: detect the
// delimiter, dot decimals, ISO dates only, a currency column is required, and
// the default limits.
type Settings struct {
	Delimiter    rune   // 0 = detect from the header line among ',' ';' '\t' '|'
	DecimalComma bool   // "1.234,50" style money
	DateFormat   string // "" = ISO YYYY-MM-DD only; else tokens YYYY MM DD with any separators, e.g. "DD.MM.YYYY", "MM/DD/YYYY"
	Currency     string // default currency when the file has no currency column / empty cell; "" = none
	MaxLineBytes int    // 0 = 1 MiB; a longer physical line rejects the file (code line_too_long)
	MaxCells     int    // 0 = 1024; more cells in a row rejects the file (code too_many_columns)
	// Extra names columns besides the canonical ones whose raw cells each
	// Row carries in Row.Extra, in this order ("" when the file has no such
	// column); matched as canonical names are (case, spaces, _ and -).
	Extra []string

	// A partner profile's mapping of the partner's own layout onto
	// payintake's (its name in Profile, for messages). Columns names, for a
	// field, the headers that carry it in the partner's files: a field it
	// names is found under those headers only (matched as canonical names
	// are), the others under their own names. Components maps the partner's
	// codes (trimmed and upper-cased, as a component is) to payintake's
	// components; when it maps any, a code it lacks gets UnknownComponent.
	Columns          map[string][]string
	Components       map[string]string
	UnknownComponent string // UnknownComponentReject (""), UnknownComponentHold or UnknownComponentKeep
	Profile          string // e.g. `partner profile acme (version 3)`

	// dateTokens is DateFormat parsed, set by NewReader so that rows do not
	// parse it again; nil means "parse DateFormat when needed".
	dateTokens []dateToken
}

// What a row whose code Components lacks gets (a profile's
// unknown_component). A held row is read with the code as its component
// and given as Row.Held: the store holds it for a reviewer.
const (
	UnknownComponentReject = "reject" // rejected with CodeUnknownComponent
	UnknownComponentHold   = "hold"   // held with CodeUnknownComponent (Row.Held)
	UnknownComponentKeep   = "keep"   // the code is the component, as sent
)

// Default limits used when the Settings fields are 0.
const (
	DefaultMaxLineBytes = 1 << 20
	DefaultMaxCells     = 1024
)

func (s Settings) maxLineBytes() int {
	if s.MaxLineBytes > 0 {
		return s.MaxLineBytes
	}
	return DefaultMaxLineBytes
}

func (s Settings) maxCells() int {
	if s.MaxCells > 0 {
		return s.MaxCells
	}
	return DefaultMaxCells
}

// dateToken is one element of a parsed date format: a token (YYYY, MM, DD) or
// a literal separator.
type dateToken struct {
	kind byte   // 'Y', 'M', 'D' or 0 for a literal
	lit  string // the literal separator
}

func (t dateToken) width() int {
	switch t.kind {
	case 'Y':
		return 4
	case 'M', 'D':
		return 2
	}
	return len(t.lit)
}

func parseDateTokens(f string) ([]dateToken, error) {
	if f == "" {
		return nil, fmt.Errorf("date format is empty; use tokens YYYY, MM and DD with separators, e.g. DD.MM.YYYY")
	}
	var toks []dateToken
	seen := map[byte]bool{}
	for i := 0; i < len(f); {
		var kind byte
		switch {
		case strings.HasPrefix(f[i:], "YYYY"):
			kind = 'Y'
		case strings.HasPrefix(f[i:], "MM"):
			kind = 'M'
		case strings.HasPrefix(f[i:], "DD"):
			kind = 'D'
		}
		if kind != 0 {
			if seen[kind] {
				return nil, fmt.Errorf("date format %q has %s more than once", f, map[byte]string{'Y': "YYYY", 'M': "MM", 'D': "DD"}[kind])
			}
			seen[kind] = true
			toks = append(toks, dateToken{kind: kind})
			i += dateToken{kind: kind}.width()
			continue
		}
		r, size := utf8.DecodeRuneInString(f[i:])
		if r == utf8.RuneError && size <= 1 {
			return nil, fmt.Errorf("date format %q is not valid UTF-8", f)
		}
		if r < 0x20 || r == 0x7f || (r < 0x80 && (r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')) || r >= 0x80 && refusedNonASCII(r) {
			return nil, fmt.Errorf("date format %q has %q at position %d; only the tokens YYYY, MM, DD and separators such as . / - or space are allowed", f, r, i+1)
		}
		if n := len(toks); n > 0 && toks[n-1].kind == 0 {
			toks[n-1].lit += f[i : i+size]
		} else {
			toks = append(toks, dateToken{lit: f[i : i+size]})
		}
		i += size
	}
	for _, k := range []byte{'Y', 'M', 'D'} {
		if !seen[k] {
			return nil, fmt.Errorf("date format %q lacks %s; it needs each of YYYY, MM and DD once", f, map[byte]string{'Y': "YYYY", 'M': "MM", 'D': "DD"}[k])
		}
	}
	return toks, nil
}

func refusedNonASCII(r rune) bool {
	// Any non-ASCII rune that is not clearly punctuation or space is refused;
	// keep it simple and allow only a few common typographic separators.
	switch r {
	case '\u00a0', '\u202f', '\u2009', '\u2013', '\u2014', '\u00b7':
		return false
	}
	return true
}

// ParseDateFormat validates a --date-format value (tokens YYYY, MM and DD,
// each exactly once, with any separators, e.g. "DD.MM.YYYY" or
// "MM/DD/YYYY") and returns the equivalent Go time layout
// ("02.01.2006"). The error names what is wrong. Separators that Go's
// layout language would misread (for example "_" before a digit token) are
// refused.
func ParseDateFormat(f string) (layout string, err error) {
	toks, err := parseDateTokens(f)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, t := range toks {
		switch t.kind {
		case 'Y':
			b.WriteString("2006")
		case 'M':
			b.WriteString("01")
		case 'D':
			b.WriteString("02")
		default:
			b.WriteString(t.lit)
		}
	}
	layout = b.String()
	// Round trip a date with distinct digits through the Go layout and our
	// own renderer: if they disagree, a separator clashed with Go's layout
	// tokens.
	probe := time.Date(2034, 11, 28, 0, 0, 0, 0, time.UTC)
	want := renderDate(toks, 2034, 11, 28)
	if got := probe.Format(layout); got != want {
		return "", fmt.Errorf("date format %q uses a separator that cannot be expressed as a Go layout; use separators such as . / - or space", f)
	}
	if back, err := time.Parse(layout, want); err != nil || !back.Equal(probe) {
		return "", fmt.Errorf("date format %q uses a separator that cannot be expressed as a Go layout; use separators such as . / - or space", f)
	}
	return layout, nil
}

func renderDate(toks []dateToken, y, m, d int) string {
	var b strings.Builder
	for _, t := range toks {
		switch t.kind {
		case 'Y':
			fmt.Fprintf(&b, "%04d", y)
		case 'M':
			fmt.Fprintf(&b, "%02d", m)
		case 'D':
			fmt.Fprintf(&b, "%02d", d)
		default:
			b.WriteString(t.lit)
		}
	}
	return b.String()
}

var isoTokens = []dateToken{{kind: 'Y'}, {lit: "-"}, {kind: 'M'}, {lit: "-"}, {kind: 'D'}}

// matchDate matches s against toks strictly (exact digit counts, exact
// separators). ok reports whether the shape matched; valid whether the date
// exists in the calendar.
func matchDate(toks []dateToken, s string) (y, m, d int, shape, valid bool) {
	i := 0
	for _, t := range toks {
		w := t.width()
		if i+w > len(s) {
			return 0, 0, 0, false, false
		}
		part := s[i : i+w]
		if t.kind == 0 {
			if part != t.lit {
				return 0, 0, 0, false, false
			}
		} else {
			if !allDigits(part) {
				return 0, 0, 0, false, false
			}
			n := 0
			for j := 0; j < len(part); j++ {
				n = n*10 + int(part[j]-'0')
			}
			switch t.kind {
			case 'Y':
				y = n
			case 'M':
				m = n
			case 'D':
				d = n
			}
		}
		i += w
	}
	if i != len(s) {
		return 0, 0, 0, false, false
	}
	valid = y >= 1 && m >= 1 && m <= 12 && d >= 1 && d <= daysIn(y, m)
	return y, m, d, true, valid
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// extraCurrencies are ISO 4217 codes introduced after the CLDR snapshot in
// golang.org/x/text/currency, with their minor units.
var extraCurrencies = map[string]int{"VES": 2, "VED": 2, "MRU": 2, "SLE": 2, "ZWG": 2}

var tenderOnce sync.Once
var tender map[string]bool

// CurrencyScale returns the ISO 4217 minor-unit digits of code (USD 2, JPY 0,
// BHD 3) and false for an unknown code. code must be three upper-case
// letters. Codes come from golang.org/x/text/currency; X codes that are not
// legal tender anywhere (XXX, XTS, XAU, XDR, ...) are unknown.
func CurrencyScale(code string) (int, bool) {
	if len(code) != 3 {
		return 0, false
	}
	for i := 0; i < 3; i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return 0, false
		}
	}
	if s := currencyScales()[currencyIndex(code)]; s >= 0 {
		return int(s), true
	}
	return 0, false
}

// currencyIndex numbers a code of three upper-case letters from 0 (AAA)
// to 26³-1 (ZZZ).
func currencyIndex(code string) int {
	return int(code[0]-'A')*26*26 + int(code[1]-'A')*26 + int(code[2]-'A')
}

// currencyScales holds currencyScale's answer for every code of three
// upper-case letters (-1: unknown), computed at the first use: a row's
// currency is looked up up to three times (normalised, echoed, hashed),
// and x/text's ParseISO costs ~0.1-0.2 µs a call, ~10% of a row's
// normalising. 17,576 bytes, never written after.
var currencyScales = sync.OnceValue(func() *[26 * 26 * 26]int8 {
	var t [26 * 26 * 26]int8
	for i := range t {
		code := string([]byte{'A' + byte(i/(26*26)), 'A' + byte(i/26%26), 'A' + byte(i%26)})
		t[i] = -1
		if s, ok := currencyScale(code); ok {
			t[i] = int8(s)
		}
	}
	return &t
})

// currencyScale is CurrencyScale computed from golang.org/x/text/currency,
// for a code of three upper-case letters.
func currencyScale(code string) (int, bool) {
	if s, ok := extraCurrencies[code]; ok {
		return s, true
	}
	u, err := currency.ParseISO(code)
	if err != nil {
		return 0, false
	}
	if code[0] == 'X' {
		tenderOnce.Do(func() {
			tender = map[string]bool{}
			for it := currency.Query(); it.Next(); {
				tender[it.Unit().String()] = true
			}
		})
		if !tender[code] {
			return 0, false
		}
	}
	scale, _ := currency.Standard.Rounding(u)
	return scale, true
}
