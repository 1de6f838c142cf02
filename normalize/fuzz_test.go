package normalize

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

var rowCodes = map[Code]bool{
	CodeMissingValue: true, CodeMangledIdentifier: true, CodeInvalidIdentifier: true, CodeInvalidAmount: true, CodeInvalidRate: true,
	CodeInvalidHours: true, CodeTooManyDecimals: true, CodeInvalidCurrency: true, CodeCurrencyMismatch: true,
	CodeInvalidDate: true, CodeTooManyCells: true, CodeMalformedRow: true,
}

var fileCodes = map[Code]bool{
	CodeEmptyFile: true, CodeInvalidEncoding: true, CodeNULByte: true, CodeMissingColumn: true,
	CodeDuplicateColumn: true, CodeLineTooLong: true, CodeTooManyColumns: true, CodeMalformedRow: true,
}

func fuzzSettings(mode byte) Settings {
	var s Settings
	if mode&1 != 0 {
		s.DecimalComma = true
	}
	if mode&2 != 0 {
		s.DateFormat = "DD.MM.YYYY"
	}
	if mode&4 != 0 {
		s.Currency = "EUR"
	}
	if mode&8 != 0 {
		s.MaxLineBytes, s.MaxCells = 64, 8
	}
	if mode&16 != 0 {
		s.Delimiter = ';'
	}
	return s
}

// checkRoundTrip asserts that a valid record's normalised values normalise to
// the same record again (canonical form is a fixed point).
func checkRoundTrip(t *testing.T, rec Record) {
	t.Helper()
	f := rec.Fields()
	again, _, err := Normalize(RawRow{f[FieldEmployeeRef], f[FieldPayPeriod], f[FieldComponent], f[FieldAmount],
		f[FieldCurrency], f[FieldHours], f[FieldRate], f[FieldPayDate]}, Settings{})
	if err != nil {
		t.Fatalf("normalised record does not normalise again: %v\n%q", err, rec.Canonical())
	}
	if !bytes.Equal(again.Canonical(), rec.Canonical()) {
		t.Fatalf("canonical form is not a fixed point:\n%q\n%q", rec.Canonical(), again.Canonical())
	}
}

func FuzzReader(f *testing.F) {
	seeds := []string{
		hdr + "E1,2026-03,base,\"$1,234.50\",usd\n",
		"\xef\xbb\xbf" + hdr + "E1,2026-03,BASE,(50.00),USD\r\n",
		"employee_ref;pay_period;component;amount;currency;hours;rate;pay_date\nE1;2026-03;BASE;1.234,50;EUR;7,5;12,00;31.03.2026\n",
		hdr + "E1,2026-03,\"multi\nline\",1,USD\n\nE2,2026-03,BA\"SE,1,USD\nE3,x,y,1,USD,,,extra\n",
		hdr + "1.23E+05,2026-03,BASE,12.345,USD\n",
		hdr + "E1,2026-03,BASE,1,US\xc3",
		hdr + "E\x001\n",
		"",
		"employee_ref\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), byte(i))
	}
	f.Add(encodeUTF16(hdr+"E1,2026-03,BASE,1,USD\n", false), byte(0))
	f.Add(encodeUTF16(hdr+"E1,2026-03,BASE,1,USD\n", true), byte(4))
	f.Fuzz(func(t *testing.T, data []byte, mode byte) {
		rd, err := NewReader(bytes.NewReader(data), fuzzSettings(mode))
		if err != nil {
			var fe *ParseError
			if !errors.As(err, &fe) || !fileCodes[fe.Code()] || fe.Message == "" {
				t.Fatalf("NewReader error %T %v", err, err)
			}
			return
		}
		lastLine, lastIndex := 1, 0
		for {
			row, err := rd.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var fe *ParseError
				if !errors.As(err, &fe) || !fileCodes[fe.Code()] || fe.Message == "" {
					t.Fatalf("Next error %T %v", err, err)
				}
				return
			}
			if row.Line < 2 || row.Line <= lastLine || row.Index != lastIndex+1 {
				t.Fatalf("row %d at line %d after row %d at line %d", row.Index, row.Line, lastIndex, lastLine)
			}
			lastLine, lastIndex = row.Line, row.Index
			if row.Err != nil {
				if !rowCodes[row.Err.Code] || row.Err.Message == "" {
					t.Fatalf("bad row error %+v", row.Err)
				}
				continue
			}
			checkRoundTrip(t, row.Record)
		}
	})
}

func FuzzNormalize(f *testing.F) {
	type seed struct {
		ref, amount, date, hours string
		mode                     byte
	}
	seeds := []seed{
		{"E1", "$1,234.50", "2026-03-31", "7.5", 0},
		{"1.23E+05", "12.345", "11/30/2026", "", 0},
		{"007", "(50.00)", "30.11.2026", "40", 2},
		{"x", "50.00-", "2026-02-30", "-1", 0},
		{"y", "1.234,50", "31.02.2026", "7,5", 3},
		{"z", "1,2,3", "", "1e5", 0},
		{"Jose\u0301", "1e5", "0000-01-01", "", 0},
		{"ß", "€ 1.234,5", "", "", 5},
		{" ", "USD 12", "2026-3-1", "", 0},
	}
	for _, s := range seeds {
		f.Add(s.ref, s.amount, s.date, s.hours, s.mode)
	}
	f.Fuzz(func(t *testing.T, ref, amount, date, hours string, mode byte) {
		cur := []string{"USD", "JPY", "BHD", "EUR", ""}[int(mode>>5)%5]
		s := fuzzSettings(mode)
		raw := RawRow{EmployeeRef: ref, PayPeriod: ref, Component: ref, Amount: amount, Currency: cur, Hours: hours, Rate: amount, PayDate: date}
		rec, disp, err := Normalize(raw, s)
		if err != nil {
			if !rowCodes[err.Code] || err.Message == "" || err.Field == "" {
				t.Fatalf("bad error %+v", err)
			}
			return
		}
		if disp.Amount != SafeCell(rec.AmountString()) {
			t.Fatalf("display amount %q vs %q", disp.Amount, rec.AmountString())
		}
		scale, _ := CurrencyScale(rec.Currency)
		if !rec.Amount.Equal(rec.Amount.Truncate(int32(scale))) {
			t.Fatalf("amount %s has more than %d decimals", rec.Amount, scale)
		}
		checkRoundTrip(t, rec)
	})
}
