package normalize

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/shopspring/decimal"
	"golang.org/x/text/unicode/norm"
)

// RawRow is one row of raw strings keyed by canonical column, as read from a
// file or received by another transport (JSON webhooks). Empty means absent.
type RawRow struct{ EmployeeRef, PayPeriod, Component, Amount, Currency, Hours, Rate, PayDate string }

// Row error codes.
const (
	CodeMissingValue      Code = "missing_value"
	CodeMangledIdentifier Code = "mangled_identifier"
	CodeInvalidIdentifier Code = "invalid_identifier"
	CodeInvalidAmount     Code = "invalid_amount"
	CodeInvalidRate       Code = "invalid_rate"
	CodeInvalidHours      Code = "invalid_hours"
	CodeTooManyDecimals   Code = "too_many_decimals"
	CodeInvalidCurrency   Code = "invalid_currency"
	CodeCurrencyMismatch  Code = "currency_mismatch"
	CodeInvalidDate       Code = "invalid_date"
	CodeTooManyCells      Code = "too_many_cells"
	CodeMalformedRow      Code = "malformed_row"
	// The row's code has no mapping in the partner's profile: rejected, or
	// held for a reviewer (RowError.Held) under unknown_component: hold.
	CodeUnknownComponent Code = "unknown_component"
)

// File error codes.
const (
	CodeEmptyFile       Code = "empty_file"
	CodeInvalidEncoding Code = "invalid_encoding"
	CodeNULByte         Code = "nul_byte"
	CodeMissingColumn   Code = "missing_column"
	CodeDuplicateColumn Code = "duplicate_column"
	CodeLineTooLong     Code = "line_too_long"
	CodeTooManyColumns  Code = "too_many_columns"

	// A workbook (.xlsx) refused whole: not a workbook that can be read, no
	// sheet of the name asked for, a formula with no saved value or whose
	// value is an error (#N/A), a header cell that is empty or merged.
	CodeInvalidWorkbook     Code = "invalid_workbook"
	CodeMissingSheet        Code = "missing_sheet"
	CodeUncalculatedFormula Code = "uncalculated_formula"
	CodeFormulaError        Code = "formula_error"
	CodeInvalidHeaderCell   Code = "invalid_header_cell"
)

// Codes of a file or row refused after normalisation, by intake or the store;
// they belong to the same vocabulary, so they are named here too.
const (
	CodeIdempotencyKeyReuse Code = "idempotency_key_reuse"
	CodeNoRows              Code = "no_rows"
	CodeRowNotReplayable    Code = "row_not_replayable"
	CodeFileNameMismatch    Code = "file_name_mismatch"
	CodeInvalidSequence     Code = "invalid_sequence"
	CodeInvalidRow          Code = "invalid_row"
	CodeReplayTargetMissing Code = "replay_target_missing"
	CodeNotReplayable       Code = "not_replayable"
	CodeWebhookIDReuse      Code = "webhook_id_reuse"
	// A file with more data rows than a workbook's sheet holds, for a
	// partner whose results are workbooks: refused whole by the engine
	// (apply), which would otherwise fail on every retry to build its
	// result.
	CodeTooManyRowsForWorkbook Code = "too_many_rows_for_workbook"
)

// Codes of a JSON body (a webhook's pay line, a leg replay's rows) refused
// whole before any of it is normalised.
const (
	CodeInvalidJSON     Code = "invalid_json"      // not JSON, or not the shape the door reads
	CodeDuplicateMember Code = "duplicate_key"     // a member given twice (in any case)
	CodeUnknownMember   Code = "unknown_member"    // a member the door does not read
	CodeInvalidType     Code = "invalid_type"      // a value of another JSON type than its field's
	CodeMoneyNotString  Code = "money_not_string"  // money as a JSON number, never converted
	CodeInvalidEntityID Code = "invalid_entity_id" // a webhook's entity_id too long
	CodeInvalidVersion  Code = "invalid_version"   // a webhook's version not a non-negative integer
	CodeInvalidRows     Code = "invalid_rows"      // a leg replay with no rows, or too many
)

// Codes of a row the store held or rejected while applying it. The
// processing SQL (apply/classify.go) writes the same words into result
// files and exceptions (SQL cannot name a Go constant); the tests of records
// and intake compare what it writes with these.
const (
	CodeRecordLocked       Code = "record_locked"         // held: the record is locked
	CodePeriodLocked       Code = "period_locked"         // held: the pay period is closed
	CodeUnknownEmployee    Code = "unknown_employee"      // rejected or held: employee_ref has no mapping
	CodeFileRejected       Code = "file_rejected"         // rejected: valid, but its all-or-nothing file was not applied
	CodeDuplicateKeyInFile Code = "duplicate_key_in_file" // rejected: its key is on another line of the file too
	CodeSuperseded         Code = "superseded"            // stale: a later version was applied already; in a review report, a change a later file replaced
	CodeRejectedByReviewer Code = "rejected_by_reviewer"  // in a review report: a reviewer rejected the held change
)

// ExceptionCodes are the codes a held row (an exception for a reviewer) can
// have, in the order reviewers' filters list them.
func ExceptionCodes() []Code {
	return []Code{CodeRecordLocked, CodePeriodLocked, CodeUnknownEmployee, CodeUnknownComponent}
}

// ExceptionCodesText lists ExceptionCodes for a message: "a, b or c".
func ExceptionCodesText() string {
	cs := ExceptionCodes()
	s := string(cs[0])
	for i, c := range cs[1:] {
		if i == len(cs)-2 {
			s += " or " + string(c)
		} else {
			s += ", " + string(c)
		}
	}
	return s
}

// Codes of an OpenPGP upload refused as a whole (package pgp, intake):
// nothing of it was read as rows.
const (
	CodePGPRequired         Code = "pgp_required"          // the partner must encrypt and sign, and did not encrypt
	CodePGPNotEnabled       Code = "pgp_not_enabled"       // an OpenPGP file from a partner without OpenPGP
	CodePGPWrongKey         Code = "pgp_wrong_key"         // encrypted to no key the platform decrypts with
	CodePGPSignatureMissing Code = "pgp_signature_missing" // not signed, and the partner must sign
	CodePGPSignatureUnknown Code = "pgp_signature_unknown" // signed by a key the partner never registered
	CodePGPSignatureInvalid Code = "pgp_signature_invalid" // signed by the partner's key, but the signature does not verify
	CodePGPCorrupt          Code = "pgp_corrupt"           // not a readable OpenPGP message, or tampered (integrity check failed)
	CodePGPTooLarge         Code = "pgp_too_large"         // the plaintext exceeds the size limit (a decompression bomb, say)
)

// maxMoneyDigits bounds the digits of a money or hours value.
const maxMoneyDigits = 30

// maxIdentLen bounds employee_ref, pay_period and component, in characters.
// They form the records' unique key: PostgreSQL cannot index a key much
// over 2.7 kB, and one such row made a whole file fail to process on every
// retry (TestHostileInput). Real identifiers are far shorter.
const maxIdentLen = 128

// checkIdent rejects an identifier too long to be one.
func checkIdent(v, field string) *RowError {
	if n := utf8.RuneCountInString(v); n > maxIdentLen {
		return &RowError{Code: CodeInvalidIdentifier, Field: field, Message: fmt.Sprintf(
			"%s is %d characters long, more than the limit of %d; check the column mapping and send the identifier itself", field, n, maxIdentLen)}

	}
	return nil
}

// Normalize validates and normalises one raw row with the partner's
// settings. It returns the record (meaningful only when the error is nil),
// the values to echo in a result file, and the first error in canonical
// order (employee_ref, pay_period, component, currency, amount, hours, rate,
// pay_date). Reader uses it for every CSV row.
func Normalize(raw RawRow, s Settings) (Record, Display, *RowError) {
	var rec Record
	var disp Display
	var errs [8]*RowError // canonical error order
	var held *RowError    // a code the profile does not map, held: only if nothing else is wrong

	// employee_ref
	if v, e := normEmployeeRef(raw.EmployeeRef); e != nil {
		errs[0] = e
		disp.EmployeeRef = SafeCell(raw.EmployeeRef)
	} else {
		rec.EmployeeRef, disp.EmployeeRef = v, SafeCell(v)
	}
	// pay_period, component
	if v, e := normCode(raw.PayPeriod, FieldPayPeriod); e != nil {
		errs[1] = e
		disp.PayPeriod = SafeCell(raw.PayPeriod)
	} else {
		rec.PayPeriod, disp.PayPeriod = v, SafeCell(v)
	}
	if v, e := normCode(raw.Component, FieldComponent); e != nil {
		errs[2] = e
		disp.Component = SafeCell(raw.Component)
	} else if len(s.Components) == 0 {
		rec.Component, disp.Component = v, SafeCell(v)
	} else {
		rec.Component, disp.Component, errs[2] = mapComponent(v, s)
		if errs[2] != nil && errs[2].Held {
			held, errs[2] = errs[2], nil
		}
	}
	// currency
	cur, scale, e := normCurrency(raw.Currency, s.Currency)
	if e != nil {
		errs[3] = e
		disp.Currency = SafeCell(raw.Currency)
		scale = -1
	} else {
		rec.Currency, disp.Currency = cur, cur
	}
	// amount
	if strings.TrimSpace(raw.Amount) == "" {
		errs[4] = &RowError{Code: CodeMissingValue, Field: FieldAmount, Message: "amount is empty; send the amount of this pay line"}
		disp.Amount = SafeCell(raw.Amount)
	} else if d, e := parseMoney(raw.Amount, FieldAmount, s.DecimalComma, cur, scale); e != nil {
		errs[4] = e
		disp.Amount = SafeCell(raw.Amount)
	} else {
		rec.Amount = d
		if scale < 0 {
			// Without a valid currency the scale is unknown: echo what was sent.
			disp.Amount = SafeCell(strings.TrimSpace(raw.Amount))
		} else {
			disp.Amount = SafeCell(moneyString(d, int32(scale)))
		}
	}
	// hours
	if strings.TrimSpace(raw.Hours) != "" {
		if d, e := parseHours(raw.Hours, s.DecimalComma); e != nil {
			errs[5] = e
		} else {
			rec.Hours = decimal.NullDecimal{Decimal: d, Valid: true}
		}
	}
	// rate
	if strings.TrimSpace(raw.Rate) != "" {
		if d, e := parseMoney(raw.Rate, FieldRate, s.DecimalComma, cur, scale); e != nil {
			errs[6] = e
		} else {
			rec.Rate = decimal.NullDecimal{Decimal: d, Valid: true}
		}
	}
	// pay_date
	if strings.TrimSpace(raw.PayDate) != "" {
		if v, e := normDate(raw.PayDate, s.DateFormat, s.dateTokens); e != nil {
			errs[7] = e
		} else {
			rec.PayDate = v
		}
	}
	for _, e := range errs {
		if e != nil {
			return rec, disp, e
		}
	}
	return rec, disp, held
}

// mapComponent maps the partner's code (normalised) through the profile's
// components. The result file echoes a mapped component with the code as
// sent after it, "BASE (REG)", so the partner sees both; the record holds
// the component alone, so its hash is the same whatever code was mapped.
// An unmapped code is echoed alone. Under UnknownComponentHold the row
// keeps the code as its component, and the error says it is held (Held):
// the store holds the row for a reviewer, who says what the code means.
func mapComponent(code string, s Settings) (component, display string, err *RowError) {
	if c, ok := s.Components[code]; ok {
		return c, SafeCell(c + " (" + code + ")"), nil
	}
	if s.UnknownComponent == UnknownComponentKeep {
		return code, SafeCell(code), nil
	}
	profile := s.Profile
	if profile == "" {
		profile = "the partner's profile"
	}
	if s.UnknownComponent == UnknownComponentHold {
		return code, SafeCell(code), &RowError{Code: CodeUnknownComponent, Field: FieldComponent, Held: true, Message: fmt.Sprintf(
			"component code %s has no mapping in %s, so this row was not applied; it is held as an exception for a reviewer, who decides which component the code means and applies the row: do not resend it", quoteRaw(code), profile)}
	}
	return "", SafeCell(code), &RowError{Code: CodeUnknownComponent, Field: FieldComponent, Message: fmt.Sprintf(
		"component code %s has no mapping in %s, so this row was not applied: ask the platform to add the code under components: in the profile, then send the row again", quoteRaw(code), profile)}
}

// quoteRaw renders a raw value for a message, shortened if long.
func quoteRaw(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func normText(raw string) string {
	v := strings.TrimSpace(raw)
	if !isASCII(v) && !norm.NFC.IsNormalString(v) {
		v = norm.NFC.String(v)
	}
	return v
}

func normEmployeeRef(raw string) (string, *RowError) {
	v := normText(raw)
	if v == "" {
		return "", &RowError{Code: CodeMissingValue, Field: FieldEmployeeRef, Message: "employee_ref is empty; send the employee's reference"}
	}
	if looksScientific(v) {
		return "", &RowError{Code: CodeMangledIdentifier, Field: FieldEmployeeRef, Message: fmt.Sprintf(
			"employee_ref %s looks like a number a spreadsheet turned into scientific notation; format the column as text and export the file again", quoteRaw(v))}

	}
	if e := checkIdent(v, FieldEmployeeRef); e != nil {
		return "", e
	}
	return v, nil
}

// looksScientific reports whether s looks like a spreadsheet's scientific
// notation: digits, an optional [.,]digits part, E or e, an optional sign and
// digits, with either a decimal part or an explicit sign.
func looksScientific(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return false
	}
	hasFrac, hasSign := false, false
	if i < len(s) && (s[i] == '.' || s[i] == ',') {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return false
		}
		hasFrac, i = true, j
	}
	if i >= len(s) || (s[i] != 'e' && s[i] != 'E') {
		return false
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		hasSign = true
		i++
	}
	if i >= len(s) || !allDigits(s[i:]) {
		return false
	}
	return hasFrac || hasSign
}

// ComponentCode is a component (or a partner's code for one) as a record
// holds it: trimmed, NFC, upper-cased; an error says why raw cannot be one.
func ComponentCode(raw string) (string, error) {
	v, e := normCode(raw, FieldComponent)
	if e != nil {
		return "", e
	}
	return v, nil
}

func normCode(raw, field string) (string, *RowError) {
	v := strings.ToUpper(normText(raw))
	if !isASCII(v) && !norm.NFC.IsNormalString(v) {
		v = norm.NFC.String(v)
	}
	if v == "" {
		what := map[string]string{FieldPayPeriod: "the pay period", FieldComponent: "the pay component"}[field]
		return "", &RowError{Code: CodeMissingValue, Field: field, Message: fmt.Sprintf("%s is empty; send %s of this pay line", field, what)}
	}
	if e := checkIdent(v, field); e != nil {
		return "", e
	}
	return v, nil
}

func normCurrency(raw, def string) (string, int, *RowError) {
	v := strings.ToUpper(strings.TrimSpace(raw))
	fromDefault := false
	if v == "" {
		v = strings.ToUpper(strings.TrimSpace(def))
		fromDefault = true
	}
	if v == "" {
		return "", 0, &RowError{Code: CodeMissingValue, Field: FieldCurrency, Message: "currency is empty; send a 3-letter ISO 4217 code such as USD or EUR"}
	}
	scale, ok := CurrencyScale(v)
	if !ok {
		msg := fmt.Sprintf("currency %s is not a known 3-letter ISO 4217 code; send a code such as USD or EUR", quoteRaw(v))
		if fromDefault {
			msg = fmt.Sprintf("the partner's default currency %s is not a known ISO 4217 code; fix the partner settings or send a currency column", quoteRaw(v))
		}
		return "", 0, &RowError{Code: CodeInvalidCurrency, Field: FieldCurrency, Message: msg}
	}
	return v, scale, nil
}

// currencySymbols maps a leading money symbol to the currencies it can denote.
// "$" alone can denote any dollar or peso currency.
var currencySymbols = map[string][]string{
	"US$": {"USD"}, "CA$": {"CAD"}, "C$": {"CAD", "NIO"}, "AU$": {"AUD"}, "A$": {"AUD"},
	"NZ$": {"NZD"}, "HK$": {"HKD"}, "S$": {"SGD"}, "R$": {"BRL"}, "NT$": {"TWD"}, "MX$": {"MXN"},
	"$": {"USD", "CAD", "AUD", "NZD", "HKD", "SGD", "MXN", "TWD", "ARS", "CLP", "COP", "UYU",
		"BSD", "BBD", "BMD", "BZD", "BND", "FJD", "GYD", "JMD", "KYD", "LRD", "NAD", "SBD", "SRD",
		"TTD", "XCD", "CUP", "DOP", "ZWL", "TVD", "KID"},
	"€": {"EUR"}, "£": {"GBP", "GIP", "FKP", "SHP", "EGP", "SYP", "LBP"}, "¥": {"JPY", "CNY"},
	"￥": {"JPY", "CNY"}, "₹": {"INR"}, "₩": {"KRW", "KPW"}, "₽": {"RUB"}, "₺": {"TRY"},
	"₪": {"ILS"}, "₫": {"VND"}, "₱": {"PHP"}, "฿": {"THB"}, "₴": {"UAH"}, "₦": {"NGN"},
	"zł": {"PLN"}, "kr": {"SEK", "NOK", "DKK", "ISK"}, "Kč": {"CZK"}, "Ft": {"HUF"},
	"CHF": {"CHF"}, "Fr.": {"CHF"}, "R": {"ZAR"},
}

// symbolOrder lists symbols longest first so "US$" wins over "$".
var symbolOrder = func() []string {
	var l []string
	for k := range currencySymbols {
		l = append(l, k)
	}
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && (len(l[j]) > len(l[j-1]) || len(l[j]) == len(l[j-1]) && l[j] < l[j-1]); j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
	return l
}()

func invalidCode(field string) Code {
	if field == FieldRate {
		return CodeInvalidRate
	}
	return CodeInvalidAmount
}

// parseMoney parses a money value exactly. cur is the row currency ("" when
// unknown) and scale its minor units (-1 when unknown: no scale check).
func parseMoney(raw, field string, decimalComma bool, cur string, scale int) (decimal.Decimal, *RowError) {
	bad := func(why string) *RowError {
		example := "1234.50"
		if decimalComma {
			example = "1234,50"
		}
		return &RowError{Code: invalidCode(field), Field: field, Message: fmt.Sprintf(
			"%s %s is not a valid money amount (%s); send a plain number such as %s", field, quoteRaw(raw), why, example)}

	}
	s := strings.TrimSpace(raw)
	neg := false
	if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") && len(s) >= 2 {
		neg = true
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	takeMinus := func() bool {
		if strings.HasPrefix(s, "-") {
			if neg {
				return false
			}
			neg = true
			s = strings.TrimSpace(s[1:])
		}
		return true
	}
	if !takeMinus() {
		return decimal.Decimal{}, bad("it has two negative signs")
	}
	// A leading currency symbol or ISO code.
	if sym, code, ok := leadingCurrency(s); ok {
		s = strings.TrimSpace(s[len(sym):])
		if cur != "" && !contains(code, cur) {
			return decimal.Decimal{}, &RowError{Code: CodeCurrencyMismatch, Field: field, Message: fmt.Sprintf(
				"%s %s is marked %q but the row currency is %s; send the amount in %s or fix the currency", field, quoteRaw(raw), sym, cur, cur)}

		}
		if !takeMinus() {
			return decimal.Decimal{}, bad("it has two negative signs")
		}
	}
	if strings.HasSuffix(s, "-") {
		if neg {
			return decimal.Decimal{}, bad("it has two negative signs")
		}
		neg = true
		s = strings.TrimSpace(s[:len(s)-1])
	}
	if strings.ContainsAny(s, "eE") {
		return decimal.Decimal{}, bad("scientific notation is not accepted")
	}
	digits, fracDigits, why := splitNumber(s, decimalComma)
	if why != "" {
		return decimal.Decimal{}, bad(why)
	}
	// Extra decimals beyond the currency's scale are accepted only if zeros.
	if scale >= 0 && len(fracDigits) > scale {
		extra := fracDigits[scale:]
		if strings.Trim(extra, "0") != "" {
			return decimal.Decimal{}, &RowError{Code: CodeTooManyDecimals, Field: field, Message: fmt.Sprintf(
				"%s %s has %d decimals but %s allows %d; send the exact amount with at most %d decimals",
				field, quoteRaw(raw), len(fracDigits), cur, scale, scale)}

		}
		fracDigits = fracDigits[:scale]
	}
	d, err := decimalOf(digits, fracDigits)
	if err != nil {
		return decimal.Decimal{}, bad("it is not a number")
	}
	if neg {
		d = d.Neg()
	}
	return d, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// leadingCurrency finds a currency symbol or a 3-letter code at the start of
// s. It returns the prefix as written and the codes it can denote.
func leadingCurrency(s string) (prefix string, codes []string, ok bool) {
	if s == "" || s[0] >= '0' && s[0] <= '9' || s[0] == '.' || s[0] == ',' {
		return "", nil, false // no symbol or code starts with a digit or a separator
	}
	for _, sym := range symbolOrder {
		if strings.HasPrefix(s, sym) {
			rest := s[len(sym):]
			// A letter symbol must not run into more letters ("R" vs "RUB").
			if isLetterASCII(sym[len(sym)-1]) && rest != "" && isLetterASCII(rest[0]) {
				continue
			}
			return sym, currencySymbols[sym], true
		}
	}
	if len(s) >= 3 && isLetterASCII(s[0]) && isLetterASCII(s[1]) && isLetterASCII(s[2]) &&
		(len(s) == 3 || !isLetterASCII(s[3])) {
		code := strings.ToUpper(s[:3])
		if _, known := CurrencyScale(code); known {
			return s[:3], []string{code}, true
		}
	}
	return "", nil, false
}

func isLetterASCII(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// Thousands separators accepted with a decimal point and with a decimal comma.
var (
	pointGroupSeps = []string{",", "'"}
	commaGroupSeps = []string{".", " ", "\u00a0", "\u202f", "'"}
)

// splitNumber validates an unsigned number with optional thousands grouping
// and returns its integer digits and fraction digits, or why it is invalid.
func splitNumber(s string, decimalComma bool) (intDigits, frac, why string) {
	if s == "" {
		return "", "", "there is no number"
	}
	decSep := "."
	groupSeps := pointGroupSeps
	if decimalComma {
		decSep = ","
		groupSeps = commaGroupSeps
	}
	intPart, fracPart, hasFrac := strings.Cut(s, decSep)
	if hasFrac {
		if fracPart == "" {
			return "", "", "it ends with a decimal separator"
		}
		if !allDigits(fracPart) {
			return "", "", "it has unexpected characters after the decimal separator"
		}
	}
	if intPart == "" {
		return "", "", "it has no digits before the decimal separator"
	}
	if allDigits(intPart) {
		intDigits = intPart
	} else {
		// Find the one grouping separator used.
		var sep string
		for _, g := range groupSeps {
			if strings.Contains(intPart, g) {
				if sep != "" {
					return "", "", "it mixes thousands separators"
				}
				sep = g
			}
		}
		if sep == "" {
			return "", "", "it has unexpected characters"
		}
		groups := strings.Split(intPart, sep)
		for i, g := range groups {
			if !allDigits(g) || g == "" {
				return "", "", "it has unexpected characters"
			}
			if i == 0 && len(g) > 3 || i > 0 && len(g) != 3 {
				return "", "", "its thousands separators are not in groups of three digits"
			}
		}
		intDigits = strings.Join(groups, "")
	}
	// Trailing zeros of the fraction add no digits of value: the written form
	// of a normalised amount (padded to the currency's scale) must pass again.
	if len(intDigits)+len(strings.TrimRight(fracPart, "0")) > maxMoneyDigits || len(intDigits)+len(fracPart) > 2*maxMoneyDigits {
		return "", "", fmt.Sprintf("it has more than %d digits", maxMoneyDigits)
	}
	return intDigits, fracPart, ""
}

func parseHours(raw string, decimalComma bool) (decimal.Decimal, *RowError) {
	s := strings.TrimSpace(raw)
	sep := byte('.')
	example := "7.5"
	if decimalComma {
		sep, example = ',', "7,5"
	}
	bad := func(why string) *RowError {
		return &RowError{Code: CodeInvalidHours, Field: FieldHours, Message: fmt.Sprintf(
			"hours %s %s; send a plain non-negative number such as %s", quoteRaw(raw), why, example)}

	}
	if strings.HasPrefix(s, "-") {
		return decimal.Decimal{}, bad("is negative")
	}
	intPart, frac, hasFrac := strings.Cut(s, string(sep))
	if intPart == "" || !allDigits(intPart) || hasFrac && (frac == "" || !allDigits(frac)) {
		if strings.ContainsAny(s, "eE") {
			return decimal.Decimal{}, bad("uses scientific notation")
		}
		return decimal.Decimal{}, bad("is not a number")
	}
	if len(intPart)+len(frac) > maxMoneyDigits {
		return decimal.Decimal{}, bad(fmt.Sprintf("has more than %d digits", maxMoneyDigits))
	}
	d, err := decimalOf(intPart, frac)
	if err != nil {
		return decimal.Decimal{}, bad("is not a number")
	}
	return d, nil
}

func normDate(raw, format string, toks []dateToken) (string, *RowError) {
	s := strings.TrimSpace(raw)
	want := "YYYY-MM-DD"
	if format != "" {
		var err error
		if toks == nil {
			toks, err = parseDateTokens(format)
		}
		if err != nil {
			return "", &RowError{Code: CodeInvalidDate, Field: FieldPayDate, Message: fmt.Sprintf(
				"pay_date cannot be read because the partner's date format is invalid (%v); fix the partner settings", err)}

		}
		want += " or " + format
		if y, m, d, shape, valid := matchDate(toks, s); shape {
			if !valid {
				return "", &RowError{Code: CodeInvalidDate, Field: FieldPayDate, Message: fmt.Sprintf(
					"pay_date %s is not a real calendar date in the format %s; send an existing date", quoteRaw(raw), format)}

			}
			return isoDate(y, m, d), nil
		}
	}
	if _, _, _, shape, valid := matchDate(isoTokens, s); shape {
		if !valid {
			return "", &RowError{Code: CodeInvalidDate, Field: FieldPayDate, Message: fmt.Sprintf(
				"pay_date %s is not a real calendar date; send an existing date as YYYY-MM-DD", quoteRaw(raw))}

		}
		return s, nil // exactly YYYY-MM-DD digits already: s is its own ISO form
	}
	return "", &RowError{Code: CodeInvalidDate, Field: FieldPayDate, Message: fmt.Sprintf(
		"pay_date %s is not in the expected form %s; send the date exactly in that form", quoteRaw(raw), want)}

}

// isoDate formats a date as YYYY-MM-DD (what fmt's "%04d-%02d-%02d" gives).
func isoDate(y, m, d int) string {
	if y < 0 || y > 9999 {
		return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
	}
	b := [10]byte{byte('0' + y/1000), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
		byte('0' + m/10%10), byte('0' + m%10), '-', byte('0' + d/10%10), byte('0' + d%10)}
	if m > 99 || d > 99 {
		return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
	}
	return string(b[:])
}

// isASCII reports whether s has only ASCII bytes (then it is NFC already).
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// decimalOf is the exact decimal intDigits.frac (both plain digit strings),
// without going through text when it fits an int64.
func decimalOf(intDigits, frac string) (decimal.Decimal, error) {
	if n := len(intDigits) + len(frac); n > 0 && n <= 18 {
		var c int64
		for _, part := range [2]string{intDigits, frac} {
			for i := 0; i < len(part); i++ {
				c = c*10 + int64(part[i]-'0')
			}
		}
		return decimal.New(c, -int32(len(frac))), nil
	}
	num := intDigits
	if frac != "" {
		num += "." + frac
	}
	return decimal.NewFromString(num)
}
