package normalize

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

func base() RawRow {
	return RawRow{EmployeeRef: "E001", PayPeriod: "2026-03", Component: "base", Amount: "1234.50", Currency: "usd"}
}

func with(f func(*RawRow)) RawRow { r := base(); f(&r); return r }

func TestNormalizeFields(t *testing.T) {
	usd := Settings{}
	dc := Settings{DecimalComma: true}
	tests := []struct {
		name      string // the trap the case guards against
		raw       RawRow
		s         Settings
		code      Code // "" = valid
		field     string
		amount    string // expected AmountString when valid
		wantHours string
		wantRate  string
		wantDate  string
	}{
		{"plain", base(), usd, "", "", "1234.50", "", "", ""},
		{"integer amount gets scale", with(func(r *RawRow) { r.Amount = "1234" }), usd, "", "", "1234.00", "", "", ""},
		{"dollar sign and grouping", with(func(r *RawRow) { r.Amount = "$1,234.50" }), usd, "", "", "1234.50", "", "", ""},
		{"US$ symbol", with(func(r *RawRow) { r.Amount = "US$ 1,234.50" }), usd, "", "", "1234.50", "", "", ""},
		{"ISO code prefix", with(func(r *RawRow) { r.Amount = "USD 1234.5" }), usd, "", "", "1234.50", "", "", ""},
		{"ISO code prefix lower case", with(func(r *RawRow) { r.Amount = "usd1234.5" }), usd, "", "", "1234.50", "", "", ""},
		{"parentheses negative", with(func(r *RawRow) { r.Amount = "(50.00)" }), usd, "", "", "-50.00", "", "", ""},
		{"parentheses with symbol", with(func(r *RawRow) { r.Amount = "($50)" }), usd, "", "", "-50.00", "", "", ""},
		{"trailing minus", with(func(r *RawRow) { r.Amount = "50.00-" }), usd, "", "", "-50.00", "", "", ""},
		{"leading minus before symbol", with(func(r *RawRow) { r.Amount = "-$50" }), usd, "", "", "-50.00", "", "", ""},
		{"minus after symbol", with(func(r *RawRow) { r.Amount = "$-50" }), usd, "", "", "-50.00", "", "", ""},
		{"surrounding spaces", with(func(r *RawRow) { r.Amount = "  1234.50 " }), usd, "", "", "1234.50", "", "", ""},
		{"double negative", with(func(r *RawRow) { r.Amount = "(-50)" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"minus both ends", with(func(r *RawRow) { r.Amount = "-50-" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"12.345 USD too many decimals, no rounding", with(func(r *RawRow) { r.Amount = "12.345" }), usd, CodeTooManyDecimals, FieldAmount, "", "", "", ""},
		{"12.500 USD exact, extra zeros fine", with(func(r *RawRow) { r.Amount = "12.500" }), usd, "", "", "12.50", "", "", ""},
		{"JPY 1000.5 too many decimals", with(func(r *RawRow) { r.Amount = "1000.5"; r.Currency = "JPY" }), usd, CodeTooManyDecimals, FieldAmount, "", "", "", ""},
		{"JPY no decimals", with(func(r *RawRow) { r.Amount = "1,000"; r.Currency = "JPY" }), usd, "", "", "1000", "", "", ""},
		{"BHD three decimals", with(func(r *RawRow) { r.Amount = "1.125"; r.Currency = "BHD" }), usd, "", "", "1.125", "", "", ""},
		{"1e5 exponent", with(func(r *RawRow) { r.Amount = "1e5" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"1.5E+3 exponent", with(func(r *RawRow) { r.Amount = "1.5E+3" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"1,2,3 bad grouping", with(func(r *RawRow) { r.Amount = "1,2,3" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"12,34 bad grouping in dot mode", with(func(r *RawRow) { r.Amount = "12,34" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"1234,567 first group too long", with(func(r *RawRow) { r.Amount = "1234,567" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"trailing decimal point", with(func(r *RawRow) { r.Amount = "12." }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"leading decimal point", with(func(r *RawRow) { r.Amount = ".5" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"words", with(func(r *RawRow) { r.Amount = "twelve" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"NaN is not money", with(func(r *RawRow) { r.Amount = "NaN" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"Infinity", with(func(r *RawRow) { r.Amount = "Inf" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"hex", with(func(r *RawRow) { r.Amount = "0x10" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"plus sign not accepted", with(func(r *RawRow) { r.Amount = "+5" }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"too many digits", with(func(r *RawRow) { r.Amount = strings.Repeat("9", 31) }), usd, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"euro sign on USD row", with(func(r *RawRow) { r.Amount = "€12" }), usd, CodeCurrencyMismatch, FieldAmount, "", "", "", ""},
		{"EUR code on USD row", with(func(r *RawRow) { r.Amount = "EUR 12" }), usd, CodeCurrencyMismatch, FieldAmount, "", "", "", ""},
		{"dollar on CAD row is fine", with(func(r *RawRow) { r.Amount = "$12"; r.Currency = "CAD" }), usd, "", "", "12.00", "", "", ""},
		{"empty amount", with(func(r *RawRow) { r.Amount = "  " }), usd, CodeMissingValue, FieldAmount, "", "", "", ""},
		{"negative zero", with(func(r *RawRow) { r.Amount = "-0" }), usd, "", "", "0.00", "", "", ""},
		// decimal comma
		{"1.234,50 decimal comma", with(func(r *RawRow) { r.Amount = "1.234,50"; r.Currency = "EUR" }), dc, "", "", "1234.50", "", "", ""},
		{"1 234,50 space grouping", with(func(r *RawRow) { r.Amount = "1 234,50"; r.Currency = "EUR" }), dc, "", "", "1234.50", "", "", ""},
		{"€ 1.234,5 decimal comma", with(func(r *RawRow) { r.Amount = "€ 1.234,5"; r.Currency = "EUR" }), dc, "", "", "1234.50", "", "", ""},
		{"1.5 is ambiguous under decimal comma", with(func(r *RawRow) { r.Amount = "1.5"; r.Currency = "EUR" }), dc, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"1.500 is a thousand under decimal comma", with(func(r *RawRow) { r.Amount = "1.500"; r.Currency = "EUR" }), dc, "", "", "1500.00", "", "", ""},
		{"1,234.50 under decimal comma", with(func(r *RawRow) { r.Amount = "1,234.50"; r.Currency = "EUR" }), dc, CodeInvalidAmount, FieldAmount, "", "", "", ""},
		{"12,345 EUR decimal comma too many decimals", with(func(r *RawRow) { r.Amount = "12,345"; r.Currency = "EUR" }), dc, CodeTooManyDecimals, FieldAmount, "", "", "", ""},
		// employee_ref
		{"1.23E+05 mangled id", with(func(r *RawRow) { r.EmployeeRef = "1.23E+05" }), usd, CodeMangledIdentifier, FieldEmployeeRef, "", "", "", ""},
		{"1,23E+05 mangled id", with(func(r *RawRow) { r.EmployeeRef = "1,23E+05" }), usd, CodeMangledIdentifier, FieldEmployeeRef, "", "", "", ""},
		{"4.5e7 mangled id", with(func(r *RawRow) { r.EmployeeRef = "4.5e7" }), usd, CodeMangledIdentifier, FieldEmployeeRef, "", "", "", ""},
		{"1E+05 mangled id", with(func(r *RawRow) { r.EmployeeRef = "1E+05" }), usd, CodeMangledIdentifier, FieldEmployeeRef, "", "", "", ""},
		{"12E3 is an identifier", with(func(r *RawRow) { r.EmployeeRef = "12E3" }), usd, "", "", "1234.50", "", "", ""},
		{"leading zeros kept", with(func(r *RawRow) { r.EmployeeRef = " 000123 " }), usd, "", "", "1234.50", "", "", ""},
		{"empty employee", with(func(r *RawRow) { r.EmployeeRef = " " }), usd, CodeMissingValue, FieldEmployeeRef, "", "", "", ""},
		{"empty period", with(func(r *RawRow) { r.PayPeriod = "" }), usd, CodeMissingValue, FieldPayPeriod, "", "", "", ""},
		{"empty component", with(func(r *RawRow) { r.Component = "" }), usd, CodeMissingValue, FieldComponent, "", "", "", ""},
		// currency
		{"unknown currency", with(func(r *RawRow) { r.Currency = "ABC" }), usd, CodeInvalidCurrency, FieldCurrency, "", "", "", ""},
		{"not 3 letters", with(func(r *RawRow) { r.Currency = "US" }), usd, CodeInvalidCurrency, FieldCurrency, "", "", "", ""},
		{"test code XTS", with(func(r *RawRow) { r.Currency = "XTS" }), usd, CodeInvalidCurrency, FieldCurrency, "", "", "", ""},
		{"XOF is money", with(func(r *RawRow) { r.Currency = "XOF"; r.Amount = "100" }), usd, "", "", "100", "", "", ""},
		{"empty currency, no default", with(func(r *RawRow) { r.Currency = "" }), usd, CodeMissingValue, FieldCurrency, "", "", "", ""},
		{"empty currency uses default", with(func(r *RawRow) { r.Currency = "" }), Settings{Currency: "eur"}, "", "", "1234.50", "", "", ""},
		{"bad default currency", with(func(r *RawRow) { r.Currency = "" }), Settings{Currency: "EURO"}, CodeInvalidCurrency, FieldCurrency, "", "", "", ""},
		{"currency before amount", with(func(r *RawRow) { r.Currency = "ZZZ"; r.Amount = "x" }), usd, CodeInvalidCurrency, FieldCurrency, "", "", "", ""},
		{"employee before everything", with(func(r *RawRow) { r.EmployeeRef = ""; r.Currency = "ZZZ"; r.Amount = "x" }), usd, CodeMissingValue, FieldEmployeeRef, "", "", "", ""},
		// hours
		{"hours canonical", with(func(r *RawRow) { r.Hours = " 7.50 " }), usd, "", "", "1234.50", "7.5", "", ""},
		{"hours integer", with(func(r *RawRow) { r.Hours = "40.00" }), usd, "", "", "1234.50", "40", "", ""},
		{"hours decimal comma", with(func(r *RawRow) { r.Hours = "7,5"; r.Amount = "1,5" }), dc, "", "", "1.50", "7.5", "", ""},
		{"hours negative", with(func(r *RawRow) { r.Hours = "-1" }), usd, CodeInvalidHours, FieldHours, "", "", "", ""},
		{"hours exponent", with(func(r *RawRow) { r.Hours = "1e2" }), usd, CodeInvalidHours, FieldHours, "", "", "", ""},
		{"hours grouped", with(func(r *RawRow) { r.Hours = "1,000" }), usd, CodeInvalidHours, FieldHours, "", "", "", ""},
		// rate
		{"rate money", with(func(r *RawRow) { r.Rate = "$25" }), usd, "", "", "1234.50", "", "25.00", ""},
		{"rate too many decimals", with(func(r *RawRow) { r.Rate = "25.125" }), usd, CodeTooManyDecimals, FieldRate, "", "", "", ""},
		{"rate invalid", with(func(r *RawRow) { r.Rate = "abc1" }), usd, CodeInvalidRate, FieldRate, "", "", "", ""},
		{"rate exponent", with(func(r *RawRow) { r.Rate = "1e1" }), usd, CodeInvalidRate, FieldRate, "", "", "", ""},
		{"hours before rate", with(func(r *RawRow) { r.Rate = "x"; r.Hours = "x" }), usd, CodeInvalidHours, FieldHours, "", "", "", ""},
		// dates
		{"ISO date", with(func(r *RawRow) { r.PayDate = " 2026-03-31 " }), usd, "", "", "1234.50", "", "", "2026-03-31"},
		{"11/30/2026 without format is never guessed", with(func(r *RawRow) { r.PayDate = "11/30/2026" }), usd, CodeInvalidDate, FieldPayDate, "", "", "", ""},
		{"11/30/2026 with MM/DD/YYYY", with(func(r *RawRow) { r.PayDate = "11/30/2026" }), Settings{DateFormat: "MM/DD/YYYY"}, "", "", "1234.50", "", "", "2026-11-30"},
		{"ISO still accepted with a format", with(func(r *RawRow) { r.PayDate = "2026-11-30" }), Settings{DateFormat: "MM/DD/YYYY"}, "", "", "1234.50", "", "", "2026-11-30"},
		{"30.11.2026 DD.MM.YYYY", with(func(r *RawRow) { r.PayDate = "30.11.2026" }), Settings{DateFormat: "DD.MM.YYYY"}, "", "", "1234.50", "", "", "2026-11-30"},
		{"1/5/2026 single digits rejected", with(func(r *RawRow) { r.PayDate = "1/5/2026" }), Settings{DateFormat: "MM/DD/YYYY"}, CodeInvalidDate, FieldPayDate, "", "", "", ""},
		{"2026-02-30 not a real date", with(func(r *RawRow) { r.PayDate = "2026-02-30" }), usd, CodeInvalidDate, FieldPayDate, "", "", "", ""},
		{"2024-02-29 leap day", with(func(r *RawRow) { r.PayDate = "2024-02-29" }), usd, "", "", "1234.50", "", "", "2024-02-29"},
		{"2026-13-01", with(func(r *RawRow) { r.PayDate = "2026-13-01" }), usd, CodeInvalidDate, FieldPayDate, "", "", "", ""},
		{"0000-01-01", with(func(r *RawRow) { r.PayDate = "0000-01-01" }), usd, CodeInvalidDate, FieldPayDate, "", "", "", ""},
		{"ISO with time", with(func(r *RawRow) { r.PayDate = "2026-03-31T00:00:00" }), usd, CodeInvalidDate, FieldPayDate, "", "", "", ""},
		{"31/02/2026 in DD/MM/YYYY", with(func(r *RawRow) { r.PayDate = "31/02/2026" }), Settings{DateFormat: "DD/MM/YYYY"}, CodeInvalidDate, FieldPayDate, "", "", "", ""},
		{"ISO-shaped partner format wins", with(func(r *RawRow) { r.PayDate = "2026-30-11" }), Settings{DateFormat: "YYYY-DD-MM"}, "", "", "1234.50", "", "", "2026-11-30"},
		{"ISO-shaped partner format, no ISO fallback", with(func(r *RawRow) { r.PayDate = "2026-11-30" }), Settings{DateFormat: "YYYY-DD-MM"}, CodeInvalidDate, FieldPayDate, "", "", "", ""},
		{"compact format", with(func(r *RawRow) { r.PayDate = "20261130" }), Settings{DateFormat: "YYYYMMDD"}, "", "", "1234.50", "", "", "2026-11-30"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, _, err := Normalize(tc.raw, tc.s)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if got := rec.AmountString(); got != tc.amount {
					t.Errorf("amount %q, want %q", got, tc.amount)
				}
				if got := rec.HoursString(); got != tc.wantHours {
					t.Errorf("hours %q, want %q", got, tc.wantHours)
				}
				if got := rec.RateString(); got != tc.wantRate {
					t.Errorf("rate %q, want %q", got, tc.wantRate)
				}
				if rec.PayDate != tc.wantDate {
					t.Errorf("date %q, want %q", rec.PayDate, tc.wantDate)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %s, got valid record %+v", tc.code, rec.Fields())
			}
			if err.Code != tc.code || err.Field != tc.field {
				t.Fatalf("got %s/%s (%s), want %s/%s", err.Code, err.Field, err.Message, tc.code, tc.field)
			}
			if err.Message == "" || strings.Contains(err.Message, "\n") {
				t.Errorf("message should be one sentence: %q", err.Message)
			}
		})
	}
}

func TestNormalizeTextFields(t *testing.T) {
	rec, disp, err := Normalize(RawRow{EmployeeRef: "  e-0012 ", PayPeriod: " 2026-03 ", Component: " Base Pay ", Amount: "1", Currency: " eur "}, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	want := Record{EmployeeRef: "e-0012", PayPeriod: "2026-03", Component: "BASE PAY", Currency: "EUR"}
	if rec.EmployeeRef != want.EmployeeRef || rec.PayPeriod != want.PayPeriod || rec.Component != want.Component || rec.Currency != want.Currency {
		t.Fatalf("got %+v", rec.Fields())
	}
	if disp != (Display{"e-0012", "2026-03", "BASE PAY", "1.00", "EUR"}) {
		t.Fatalf("display %+v", disp)
	}
}

func TestMessageExample(t *testing.T) {
	_, _, err := Normalize(with(func(r *RawRow) { r.Amount = "12.345" }), Settings{})
	want := `amount "12.345" has 3 decimals but USD allows 2; send the exact amount with at most 2 decimals`
	if err == nil || err.Message != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestDisplay(t *testing.T) {
	_, disp, err := Normalize(RawRow{EmployeeRef: "=HYPERLINK(\"x\")", PayPeriod: "p", Component: "c", Amount: "=1+1", Currency: "usd"}, Settings{})
	if err == nil || err.Code != CodeInvalidAmount {
		t.Fatalf("err %v", err)
	}
	want := Display{`'=HYPERLINK("x")`, "P", "C", "'=1+1", "USD"}
	if disp != want {
		t.Fatalf("display %+v, want %+v", disp, want)
	}
	// A bad currency: amount cannot be scaled, raw amount echoed.
	_, disp, _ = Normalize(RawRow{EmployeeRef: "1", PayPeriod: "p", Component: "c", Amount: "-5", Currency: "@x"}, Settings{})
	if disp.Currency != "'@x" || disp.Amount != "-5" {
		t.Fatalf("display %+v", disp)
	}
}

func TestFormattingVariantsHashEqual(t *testing.T) {
	variants := []RawRow{
		{EmployeeRef: "E1", PayPeriod: "2026-03", Component: "BASE", Amount: "1234.50", Currency: "USD", Hours: "7.5", Rate: "25", PayDate: "2026-03-31"},
		{EmployeeRef: " E1 ", PayPeriod: " 2026-03", Component: "base ", Amount: " 1,234.5 ", Currency: "usd", Hours: "7.50", Rate: "25.00", PayDate: " 2026-03-31 "},
		{EmployeeRef: "E1", PayPeriod: "2026-03", Component: "Base", Amount: "$1,234.50", Currency: " Usd ", Hours: "07.500", Rate: "$25.000", PayDate: "2026-03-31"},
		{EmployeeRef: "E1", PayPeriod: "2026-03", Component: "BASE", Amount: "USD 1234.500", Currency: "USD", Hours: "7.5", Rate: "USD25", PayDate: "2026-03-31"},
	}
	var first [32]byte
	for i, v := range variants {
		rec, _, err := Normalize(v, Settings{})
		if err != nil {
			t.Fatalf("variant %d: %v", i, err)
		}
		if i == 0 {
			first = rec.Hash()
		} else if rec.Hash() != first {
			t.Errorf("variant %d hashes differently:\n%s", i, rec.Canonical())
		}
	}
	// Decimal comma partner sending the same amounts.
	rec, _, err := Normalize(RawRow{EmployeeRef: "E1", PayPeriod: "2026-03", Component: "BASE", Amount: "1.234,50", Currency: "USD", Hours: "7,5", Rate: "25", PayDate: "31.03.2026"}, Settings{DecimalComma: true, DateFormat: "DD.MM.YYYY"})
	if err != nil || rec.Hash() != first {
		t.Errorf("decimal comma variant: %v\n%s", err, rec.Canonical())
	}
	// Unicode: composed and decomposed forms hash equal.
	a, _, _ := Normalize(RawRow{EmployeeRef: "Jos\u00e9", PayPeriod: "p", Component: "c", Amount: "1", Currency: "USD"}, Settings{})
	b, _, _ := Normalize(RawRow{EmployeeRef: "Jose\u0301", PayPeriod: "p", Component: "c", Amount: "1", Currency: "USD"}, Settings{})
	if a.Hash() != b.Hash() {
		t.Error("NFC and NFD hash differently")
	}
	// A real change does change the hash.
	c, _, _ := Normalize(RawRow{EmployeeRef: "E1", PayPeriod: "2026-03", Component: "BASE", Amount: "1234.51", Currency: "USD", Hours: "7.5", Rate: "25", PayDate: "2026-03-31"}, Settings{})
	if c.Hash() == first {
		t.Error("a different amount hashes equal")
	}
}

// The expected hashes were computed independently in a shell, e.g.
//
//	printf 'payintake-record-v1\nemployee_ref=E001\npay_period=2026-03\ncomponent=BASE\namount=1234.50\ncurrency=USD\nhours=\nrate=\npay_date=\n' | sha256sum
//
// If this test fails, the canonical format changed: every stored hash would
// change with it.
func TestCanonicalGolden(t *testing.T) {
	tests := []struct {
		rec       Record
		canonical string
		sha       string
	}{
		{
			Record{EmployeeRef: "E001", PayPeriod: "2026-03", Component: "BASE", Amount: decimal.RequireFromString("1234.5"), Currency: "USD"},
			"payintake-record-v1\nemployee_ref=E001\npay_period=2026-03\ncomponent=BASE\namount=1234.50\ncurrency=USD\nhours=\nrate=\npay_date=\n",
			"4e01903df0c2c844e6c815ff92be8bbaf7890a5fec0990c562c9ab7bed3b479a",
		},
		{
			Record{EmployeeRef: "007", PayPeriod: "2026-03", Component: "OVERTIME", Amount: decimal.RequireFromString("-50"), Currency: "EUR",
				Hours: decimal.NewNullDecimal(decimal.RequireFromString("7.50")), Rate: decimal.NewNullDecimal(decimal.RequireFromString("25")), PayDate: "2026-03-31"},
			"payintake-record-v1\nemployee_ref=007\npay_period=2026-03\ncomponent=OVERTIME\namount=-50.00\ncurrency=EUR\nhours=7.5\nrate=25.00\npay_date=2026-03-31\n",
			"7203b3f9d04be363ae48c3c33420f37ea9f9622e2f79fd15076aff1dc95a5d32",
		},
		{
			Record{EmployeeRef: "A\\B\nC", PayPeriod: "P", Component: "C", Amount: decimal.RequireFromString("1000"), Currency: "JPY"},
			"payintake-record-v1\nemployee_ref=A\\\\B\\nC\npay_period=P\ncomponent=C\namount=1000\ncurrency=JPY\nhours=\nrate=\npay_date=\n",
			"2300a223cc4cebe4fe2d438d49f21e5244b2fc15fea6bb4bd69db24c1e166a43",
		},
	}
	for _, tc := range tests {
		if got := string(tc.rec.Canonical()); got != tc.canonical {
			t.Errorf("canonical\n%q\nwant\n%q", got, tc.canonical)
		}
		h := tc.rec.Hash()
		if got := hex.EncodeToString(h[:]); got != tc.sha {
			t.Errorf("hash %s, want %s", got, tc.sha)
		}
	}
}

func TestFields(t *testing.T) {
	rec, _, err := Normalize(RawRow{EmployeeRef: "E", PayPeriod: "p", Component: "c", Amount: "1000", Currency: "JPY", Hours: "40.0"}, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	f := rec.Fields()
	want := map[string]string{"employee_ref": "E", "pay_period": "P", "component": "C", "amount": "1000", "currency": "JPY", "hours": "40", "rate": "", "pay_date": ""}
	if len(f) != 8 {
		t.Fatalf("fields %v", f)
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
}

func TestSafeCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"=SUM(A1)", "'=SUM(A1)"},
		{"-5", "-5"}, // a number, not a formula
		{"+1", "+1"}, // a number
		{"-12.50", "-12.50"},
		{"-1,5", "-1,5"},
		{"@x", "'@x"},
		{"+cmd", "'+cmd"},
		{"-2+3", "'-2+3"},
		{"-", "'-"},
		{"\t=1", "'\t=1"},
		{"\r5", "'\r5"},
		{"plain", "plain"},
		{"", ""},
		{"5=5", "5=5"},
	}
	for _, tc := range tests {
		if got := SafeCell(tc.in); got != tc.want {
			t.Errorf("SafeCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseDateFormat(t *testing.T) {
	good := map[string]string{"DD.MM.YYYY": "02.01.2006", "MM/DD/YYYY": "01/02/2006", "YYYY-MM-DD": "2006-01-02", "YYYYMMDD": "20060102", "DD_MM_YYYY": "02_01_2006", "YYYY_MM_DD": "2006_01_02", "YYYY,MM,DD": "2006,01,02", "DD MM YYYY": "02 01 2006"}
	for f, want := range good {
		got, err := ParseDateFormat(f)
		if err != nil || got != want {
			t.Errorf("ParseDateFormat(%q) = %q, %v; want %q", f, got, err, want)
		}
	}
	bad := map[string]string{
		"":            "empty",
		"DD.MM.YY":    "position 7",
		"DD.MM":       "lacks YYYY",
		"YYYY-MM-DDD": "position 11",
		"DD.DD.YYYY":  "has DD more than once",
		"YYYY-MM-MM":  "more than once",
		"D.M.YYYY":    "position",
		"YYYY-MM-DDx": "position",
	}
	for f, want := range bad {
		_, err := ParseDateFormat(f)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDateFormat(%q) error %v, want mention of %q", f, err, want)
		}
	}
}

func TestCurrencyScale(t *testing.T) {
	tests := []struct {
		code  string
		scale int
		ok    bool
	}{
		{"USD", 2, true}, {"JPY", 0, true}, {"BHD", 3, true}, {"EUR", 2, true}, {"KWD", 3, true},
		{"XOF", 0, true}, {"VES", 2, true}, {"ABC", 0, false}, {"usd", 0, false}, {"XXX", 0, false},
		{"XAU", 0, false}, {"US", 0, false}, {"", 0, false},
	}
	for _, tc := range tests {
		s, ok := CurrencyScale(tc.code)
		if s != tc.scale || ok != tc.ok {
			t.Errorf("CurrencyScale(%q) = %d, %v; want %d, %v", tc.code, s, ok, tc.scale, tc.ok)
		}
	}
}

// An identifier too long for the records' unique index is a rejected row,
// not a file that fails on every retry.
func TestIdentifierLimits(t *testing.T) {
	ok := RawRow{EmployeeRef: "E1", PayPeriod: "2026-11", Component: "BASE", Amount: "1", Currency: "USD"}
	for _, c := range []struct {
		name  string
		set   func(*RawRow)
		field string
	}{
		{"long employee_ref", func(r *RawRow) { r.EmployeeRef = strings.Repeat("x", 129) }, FieldEmployeeRef},
		{"10 kB employee_ref", func(r *RawRow) { r.EmployeeRef = strings.Repeat("ab", 5000) }, FieldEmployeeRef},
		{"long pay_period", func(r *RawRow) { r.PayPeriod = strings.Repeat("9", 200) }, FieldPayPeriod},
		{"long component", func(r *RawRow) { r.Component = strings.Repeat("é", 129) }, FieldComponent},
	} {
		raw := ok
		c.set(&raw)
		_, _, e := Normalize(raw, Settings{})
		if e == nil || e.Code != CodeInvalidIdentifier || e.Field != c.field {
			t.Errorf("%s: %+v, want %s on %s", c.name, e, CodeInvalidIdentifier, c.field)
		}
	}
	raw := ok
	raw.EmployeeRef = strings.Repeat("é", 128)
	if _, _, e := Normalize(raw, Settings{}); e != nil {
		t.Errorf("128 characters: %v", e)
	}
}

// The table CurrencyScale reads gives, for every code of three upper-case
// letters, what golang.org/x/text/currency gives.
func TestCurrencyScaleTable(t *testing.T) {
	known := 0
	for a := 'A'; a <= 'Z'; a++ {
		for b := 'A'; b <= 'Z'; b++ {
			for c := 'A'; c <= 'Z'; c++ {
				code := string([]rune{a, b, c})
				s, ok := CurrencyScale(code)
				ws, wok := currencyScale(code)
				if s != ws || ok != wok {
					t.Fatalf("CurrencyScale(%q) = %d, %v; x/text gives %d, %v", code, s, ok, ws, wok)
				}
				if ok {
					known++
				}
			}
		}
	}
	if known < 150 {
		t.Fatalf("%d codes known, want the ISO 4217 list (~160)", known)
	}
}
