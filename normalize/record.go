package normalize

import (
	"crypto/sha256"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// Canonical field names, in canonical order. These are the column names of
// the contract and the keys of Record.Fields.
const (
	FieldEmployeeRef = "employee_ref"
	FieldPayPeriod   = "pay_period"
	FieldComponent   = "component"
	FieldAmount      = "amount"
	FieldCurrency    = "currency"
	FieldHours       = "hours"
	FieldRate        = "rate"
	FieldPayDate     = "pay_date"
)

// FieldNames lists the eight canonical fields in the order used by
// Canonical. Do not modify.
var FieldNames = []string{
	FieldEmployeeRef, FieldPayPeriod, FieldComponent, FieldAmount,
	FieldCurrency, FieldHours, FieldRate, FieldPayDate,
}

// CanonicalVersion is the first line of every Canonical serialisation.
const CanonicalVersion = "payintake-record-v1"

// Record is a valid normalised row.
type Record struct {
	EmployeeRef string              // trimmed, NFC, case and leading zeros kept
	PayPeriod   string              // trimmed, NFC, upper-cased
	Component   string              // trimmed, NFC, upper-cased
	Amount      decimal.Decimal     // exact, at the currency's scale
	Currency    string              // ISO 4217 code, upper-cased
	Hours       decimal.NullDecimal // non-negative, exact
	Rate        decimal.NullDecimal // money, currency scale
	PayDate     string              // "YYYY-MM-DD" or ""
}

// scale returns the currency's minor-unit digits, or -1 when the currency is
// unknown (then money is written in its shortest exact form).
func (r Record) scale() int32 {
	if s, ok := CurrencyScale(r.Currency); ok {
		return int32(s)
	}
	return -1
}

func moneyString(d decimal.Decimal, scale int32) string {
	if scale < 0 {
		return d.String()
	}
	if s, ok := fixedString(d, scale); ok {
		return s
	}
	return d.StringFixed(scale)
}

// fixedString is d.StringFixed(scale) for the usual case, computed on an
// int64: a coefficient of at most 18 digits that needs no rounding at
// scale. ok is false otherwise.
func fixedString(d decimal.Decimal, scale int32) (string, bool) {
	exp := d.Exponent()
	if scale > 18 || -exp > scale || exp > 18 || d.NumDigits()+int(scale+exp) > 18 {
		return "", false
	}
	c := d.CoefficientInt64()
	for i := int32(0); i < scale+exp; i++ {
		c *= 10
	}
	var buf, dbuf [24]byte
	b := buf[:0]
	if c < 0 {
		b = append(b, '-')
		c = -c
	}
	digits := strconv.AppendInt(dbuf[:0], c, 10)
	n := len(digits)
	if int32(n) <= scale { // 0.05: pad with leading zeros
		b = append(b, '0')
		if scale > 0 {
			b = append(b, '.')
		}
		for i := int32(n); i < scale; i++ {
			b = append(b, '0')
		}
		return string(append(b, digits...)), true
	}
	intLen := n - int(scale)
	b = append(b, digits[:intLen]...)
	if scale > 0 {
		b = append(b, '.')
		b = append(b, digits[intLen:]...)
	}
	return string(b), true
}

// AmountString returns the amount fixed at the currency's scale, for example
// "1234.50", "-50.00", or "1000" for JPY.
func (r Record) AmountString() string { return moneyString(r.Amount, r.scale()) }

// RateString returns "" when the rate is null, else the rate fixed at the
// currency's scale.
func (r Record) RateString() string {
	if !r.Rate.Valid {
		return ""
	}
	return moneyString(r.Rate.Decimal, r.scale())
}

// HoursString returns "" when hours are null, else the canonical decimal
// without trailing zeros ("7.5", "40").
func (r Record) HoursString() string {
	if !r.Hours.Valid {
		return ""
	}
	return r.Hours.Decimal.String()
}

// Fields returns field name → normalised string value for all eight canonical
// fields, "" when a field is absent. Values are those Canonical hashes.
func (r Record) Fields() map[string]string {
	v := r.Values()
	m := make(map[string]string, len(FieldNames))
	for i, name := range FieldNames {
		m[name] = v[i]
	}
	return m
}

// Values returns the eight normalised field values in FieldNames order, as
// Canonical digests them.
func (r Record) Values() [8]string {
	return [8]string{r.EmployeeRef, r.PayPeriod, r.Component, r.AmountString(),
		r.Currency, r.HoursString(), r.RateString(), r.PayDate}
}

var canonicalEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

// Canonical returns the byte-stable serialisation that Hash digests. Its
// format (version 1) is, byte for byte:
//
//	payintake-record-v1\n
//	employee_ref=<value>\n
//	pay_period=<value>\n
//	component=<value>\n
//	amount=<value>\n
//	currency=<value>\n
//	hours=<value>\n
//	rate=<value>\n
//	pay_date=<value>\n
//
// always all eight lines in this order, values as Fields gives them (the
// *String methods for numbers, "" when absent), UTF-8, with a backslash in a
// value written as `\\` and a line feed as `\n` so the encoding is injective.
// Example for USD 1234.50 with no hours, rate or date:
//
//	"payintake-record-v1\nemployee_ref=E001\npay_period=2026-03\ncomponent=BASE\namount=1234.50\ncurrency=USD\nhours=\nrate=\npay_date=\n"
//
// Changing this format changes every hash; bump CanonicalVersion if it must.
func (r Record) Canonical() []byte { return appendCanonical(make([]byte, 0, 160), r.Values()) }

func appendCanonical(b []byte, v [8]string) []byte {
	b = append(b, CanonicalVersion...)
	b = append(b, '\n')
	for i, name := range FieldNames {
		b = append(b, name...)
		b = append(b, '=')
		if strings.IndexByte(v[i], '\\') >= 0 || strings.IndexByte(v[i], '\n') >= 0 {
			b = append(b, canonicalEscaper.Replace(v[i])...)
		} else {
			b = append(b, v[i]...)
		}
		b = append(b, '\n')
	}
	return b
}

// Hash returns the SHA-256 of Canonical: the record's content identity.
func (r Record) Hash() [32]byte {
	h, _ := r.HashValues()
	return h
}

// HashValues returns Hash together with the Values it digested, so a caller
// that needs both formats the numbers once.
func (r Record) HashValues() ([32]byte, [8]string) {
	v := r.Values()
	return HashOfValues(v), v
}

// HashOfValues is the Hash of the record whose Values are v: for values
// already normalised (a held row's, stored, given another component).
func HashOfValues(v [8]string) [32]byte {
	var buf [256]byte
	return sha256.Sum256(appendCanonical(buf[:0], v))
}

// Display holds what the result file echoes for a row: the normalised value
// where that field could be normalised, else the raw value. Every value has
// been passed through SafeCell.
type Display struct{ EmployeeRef, PayPeriod, Component, Amount, Currency string }

// Row is one data row read by Reader.
type Row struct {
	Line    int       // physical line where the row starts; the header is line 1
	Index   int       // 1-based data row index (blank rows are not counted)
	Record  Record    // valid when Err == nil
	Display Display   // values for the result file
	Err     *RowError // nil for a valid row
	// Held, for a valid row, says why the store is to hold it for a
	// reviewer rather than apply it (a component code the profile does
	// not map, under unknown_component: hold); nil for most rows.
	Held  *RowError
	Extra []string // the raw cells of Settings.Extra's columns, when it names any
}

func isPlainNumber(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	intPart, frac, hasFrac := cutAny(s, ".,")
	if !allDigits(intPart) || intPart == "" {
		return false
	}
	return !hasFrac || (frac != "" && allDigits(frac))
}

func cutAny(s, seps string) (before, after string, found bool) {
	if i := strings.IndexAny(s, seps); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
