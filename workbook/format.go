package workbook

import (
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// format is what a cell's number format means for reading its value.
type format struct {
	kind  formatKind
	zeros int // kindZeroPadded: the digits shown
}

type formatKind uint8

const (
	kindNumber     formatKind = iota
	kindDate                  // a day (and maybe a time of day)
	kindTime                  // a time of day or a duration
	kindZeroPadded            // "00000": an integer shown with leading zeros
)

// formatOf classifies a number format: a custom code (codes) or a
// built-in id (ECMA-376 part 1 §18.8.30, with the East Asian date formats
// 27–36 and 50–58).
func formatOf(id int, codes map[int]string) format {
	if code, ok := codes[id]; ok {
		return formatOfCode(code)
	}
	switch {
	case id >= 14 && id <= 17, id == 22, id >= 27 && id <= 36, id >= 50 && id <= 58:
		return format{kind: kindDate}
	case id >= 18 && id <= 21, id >= 45 && id <= 47:
		return format{kind: kindTime}
	}
	return format{}
}

// formatOfCode classifies a custom format code by its first section (the
// one for positive numbers): quoted text, escaped characters and bracketed
// parts (colours, locales) are not format letters, except elapsed time
// ([h], [mm], [ss]).
func formatOfCode(code string) format {
	var b strings.Builder
	elapsed := false
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch c {
		case ';':
			i = len(code)
		case '"':
			j := strings.IndexByte(code[i+1:], '"')
			if j < 0 {
				i = len(code)
			} else {
				i += j + 1
			}
		case '\\', '_', '*':
			i++ // the next character is literal, or padding
		case '[':
			j := strings.IndexByte(code[i:], ']')
			if j < 0 {
				i = len(code)
				break
			}
			inner := strings.ToLower(code[i+1 : i+j])
			if inner != "" && strings.Trim(inner, "hms") == "" {
				elapsed = true
			}
			i += j
		default:
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
	}
	s := b.String()
	hasDate := strings.ContainsAny(s, "yd") || strings.Contains(s, "m") && !strings.ContainsAny(s, "hs")
	switch {
	case hasDate && !elapsed:
		return format{kind: kindDate}
	case elapsed || strings.ContainsAny(s, "hs") && strings.Contains(s, ":"):
		return format{kind: kindTime}
	}
	if n := len(s); n > 1 && strings.Trim(s, "0") == "" {
		return format{kind: kindZeroPadded, zeros: n}
	}
	return format{}
}

// excelDigits is the precision Excel keeps and shows: a stored number's
// digits beyond it are the binary double's noise.
const excelDigits = 15

// numberText is a stored number (the <v> text, such as "0.07", "1E-3" or
// "0.30000000000000004") as decimal text, exactly, to Excel's 15
// significant digits; one of more than 15 whole digits as Excel shows it
// (1.23456789012346E+17); ok false when it is not a number.
func numberText(v string) (string, bool) {
	if plainDecimal(v) {
		return v, true
	}
	d, err := decimal.NewFromString(v)
	if err != nil {
		return v, false
	}
	if d.IsZero() {
		return "0", true
	}
	if n := int(d.NumDigits()); n > excelDigits {
		lead := n + int(d.Exponent()) - 1 // power of ten of the first significant digit
		d = d.Round(int32(excelDigits - 1 - lead))
	}
	if whole := d.Truncate(0).Abs().String(); len(whole) > excelDigits {
		// Excel cannot hold it exactly (a long identifier typed as a
		// number) and shows it as 1.23456789012346E+17: so is it given,
		// which normalize refuses as it refuses such a CSV cell, rather
		// than as digits Excel never had.
		sig := strings.TrimRight(whole[:excelDigits], "0")
		mant := sig[:1]
		if len(sig) > 1 {
			mant += "." + sig[1:]
		}
		if d.Sign() < 0 {
			mant = "-" + mant
		}
		return fmt.Sprintf("%sE+%d", mant, len(whole)-1), true
	}
	return d.String(), true
}

// plainDecimal: an optional '-', digits and at most one '.', with a digit
// on each side of it and at most 15 significant digits (Excel's own output
// for nearly every number), which is already what numberText would give.
func plainDecimal(v string) bool {
	v = strings.TrimPrefix(v, "-")
	if v == "" {
		return false
	}
	digits, dot, lead := 0, -1, true
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '.' && dot < 0:
			dot = i
		case c >= '0' && c <= '9':
			if c != '0' || !lead {
				lead = false
				digits++
			}
		default:
			return false
		}
	}
	if dot == 0 || dot == len(v)-1 || len(v) > 1 && v[0] == '0' && dot != 1 {
		return false
	}
	if dot > 0 && strings.HasSuffix(v, "0") { // "2.50": trailing zeros decimal.String drops
		return false
	}
	return digits <= excelDigits
}

var (
	epoch1900 = time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC)
	epoch1904 = time.Date(1904, 1, 1, 0, 0, 0, 0, time.UTC)
)

// serialDate is a date serial (days since the workbook's epoch, a
// fraction for the time of day) as YYYY-MM-DD, or YYYY-MM-DDTHH:MM:SS
// when it has a time of day; ok false when it is not a number.
func serialDate(v string, date1904 bool) (string, bool) {
	days, secs, ok := splitSerial(v)
	if !ok || days < 0 {
		return v, ok
	}
	var t time.Time
	switch {
	case date1904:
		t = epoch1904.AddDate(0, 0, days)
	case days == 60:
		// Lotus 1-2-3's 29 February 1900, which Excel keeps: no such day.
		return "1900-02-29", true
	case days < 60:
		t = epoch1900.AddDate(0, 0, days+1)
	default:
		t = epoch1900.AddDate(0, 0, days)
	}
	if secs == 0 {
		return t.Format(time.DateOnly), true
	}
	return t.Add(time.Duration(secs) * time.Second).Format("2006-01-02T15:04:05"), true
}

// serialTime is a time serial (a fraction of a day, or days and a
// fraction for a duration) as H:MM:SS.
func serialTime(v string) (string, bool) {
	days, secs, ok := splitSerial(v)
	if !ok || days < 0 {
		return v, ok
	}
	total := days*86400 + secs
	return fmt.Sprintf("%d:%02d:%02d", total/3600, total/60%60, total%60), true
}

// splitSerial splits a serial into whole days and the seconds of the
// fraction, rounded to the second as Excel shows them (decimal, no float).
func splitSerial(v string) (days, secs int, ok bool) {
	d, err := decimal.NewFromString(v)
	if err != nil {
		return 0, 0, false
	}
	whole := d.Floor()
	s := d.Sub(whole).Mul(decimal.NewFromInt(86400)).Round(0).IntPart()
	days = int(whole.IntPart())
	if s == 86400 {
		days, s = days+1, 0
	}
	return days, int(s), true
}

// zeroPadded is an integer shown with a format of n zeros: "123" as
// "00123"; other values as they are.
func zeroPadded(v string, n int) string {
	if len(v) >= n || strings.Trim(v, "0123456789") != "" {
		return v
	}
	return strings.Repeat("0", n-len(v)) + v
}

// inDateFormat writes an ISO date (YYYY-MM-DD) in a date format of
// normalize's tokens (YYYY, MM, DD); "" leaves it ISO.
func inDateFormat(iso, layout string) string {
	if layout == "" {
		return iso
	}
	r := strings.NewReplacer("YYYY", iso[0:4], "MM", iso[5:7], "DD", iso[8:10])
	return r.Replace(strings.ToUpper(layout))
}
