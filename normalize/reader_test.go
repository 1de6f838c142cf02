package normalize

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf16"
)

const hdr = "employee_ref,pay_period,component,amount,currency\n"

// readAll reads every row; it returns the rows and the terminal error (nil at EOF).
func readAll(t testing.TB, r io.Reader, s Settings) ([]Row, error) {
	t.Helper()
	rd, err := NewReader(r, s)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for {
		row, err := rd.Next()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
}

func mustRows(t *testing.T, in string, s Settings) []Row {
	t.Helper()
	rows, err := readAll(t, strings.NewReader(in), s)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return rows
}

func fileErr(t *testing.T, err error, code Code, line int) *ParseError {
	t.Helper()
	var fe *ParseError
	if !errors.As(err, &fe) {
		t.Fatalf("want *ParseError %s, got %T %v", code, err, err)
	}
	if fe.Code() != code || (line >= 0 && fe.StartLine != line) {
		t.Fatalf("got %s line %d (%s), want %s line %d", fe.Code(), fe.StartLine, fe.Message, code, line)
	}
	return fe
}

func encodeUTF16(s string, big bool) []byte {
	units := utf16.Encode([]rune("\uFEFF" + s))
	var b bytes.Buffer
	for _, u := range units {
		if big {
			b.WriteByte(byte(u >> 8))
			b.WriteByte(byte(u))
		} else {
			b.WriteByte(byte(u))
			b.WriteByte(byte(u >> 8))
		}
	}
	return b.Bytes()
}

func TestReaderEncodings(t *testing.T) {
	body := "E1,2026-03,base,\"1,234.50\",usd\r\nÉmile,2026-03,bonus,€5,EUR\r\n"
	plain := strings.ReplaceAll(hdr, "\n", "\r\n") + body
	inputs := map[string][]byte{
		"utf8":              []byte(plain),
		"utf8 BOM":          append([]byte{0xEF, 0xBB, 0xBF}, plain...),
		"utf16le BOM":       encodeUTF16(plain, false),
		"utf16be BOM":       encodeUTF16(plain, true),
		"utf8 1-byte io":    []byte(plain), // read one byte at a time below
		"utf16be 1-byte io": encodeUTF16(plain, true),
		"no final newline":  []byte(strings.TrimSuffix(plain, "\r\n")),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(in)
			if strings.Contains(name, "1-byte") {
				r = iotest.OneByteReader(r)
			}
			rows, err := readAll(t, r, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 {
				t.Fatalf("got %d rows", len(rows))
			}
			for _, row := range rows {
				if row.Err != nil {
					t.Fatalf("row %d: %v", row.Index, row.Err)
				}
			}
			if rows[0].Record.EmployeeRef != "E1" || rows[0].Record.AmountString() != "1234.50" || rows[0].Line != 2 {
				t.Fatalf("row 1 %+v", rows[0])
			}
			if rows[1].Record.EmployeeRef != "Émile" || rows[1].Record.AmountString() != "5.00" || rows[1].Line != 3 || rows[1].Record.Currency != "EUR" {
				t.Fatalf("row 2 %+v", rows[1])
			}
		})
	}
}

func TestReaderInvalidUTF8(t *testing.T) {
	in := hdr + "E1,2026-03,BASE,1,USD\nE2,2026-03,BASE,1,USD\nJos\xe9,2026-03,BASE,1,USD\n"
	for _, oneByte := range []bool{false, true} {
		var r io.Reader = strings.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		_, err := readAll(t, r, Settings{})
		fe := fileErr(t, err, CodeInvalidEncoding, 4)
		if !strings.Contains(fe.Message, "line 4") || !strings.Contains(fe.Message, "UTF-8") {
			t.Errorf("message %q", fe.Message)
		}
	}
	// Invalid in the header: NewReader fails.
	_, err := NewReader(strings.NewReader("employee\xff_ref,x\n"), Settings{})
	fileErr(t, err, CodeInvalidEncoding, 1)
	// Truncated multibyte rune at EOF.
	_, err = readAll(t, strings.NewReader(hdr+"E1,2026-03,BASE,1,US\xc3"), Settings{})
	fileErr(t, err, CodeInvalidEncoding, 2)
}

func TestReaderMultibyteSplitAcrossReads(t *testing.T) {
	// Many multibyte runes so that chunk boundaries fall inside runes.
	var b strings.Builder
	b.WriteString(hdr)
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "Zoë-日本-😀%d,2026-03,BASE,1,USD\n", i)
	}
	for _, chunk := range []int{1, 2, 3, 7, 4096} {
		rows, err := readAll(t, &chunkReader{data: []byte(b.String()), n: chunk}, Settings{})
		if err != nil || len(rows) != 5000 {
			t.Fatalf("chunk %d: %d rows, %v", chunk, len(rows), err)
		}
		if rows[4999].Record.EmployeeRef != "Zoë-日本-😀4999" {
			t.Fatalf("chunk %d: %q", chunk, rows[4999].Record.EmployeeRef)
		}
	}
}

type chunkReader struct {
	data []byte
	n    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(c.n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func TestReaderNUL(t *testing.T) {
	_, err := readAll(t, strings.NewReader(hdr+"E1,2026-03,BASE,1,USD\nE\x002\n"), Settings{})
	fe := fileErr(t, err, CodeNULByte, 3)
	if !strings.Contains(fe.Message, "save the file as UTF-8, or UTF-16 with a byte-order mark") {
		t.Errorf("message %q", fe.Message)
	}
	// UTF-16LE without BOM: NUL on the header line.
	in := encodeUTF16(hdr, false)[2:]
	_, err = NewReader(bytes.NewReader(in), Settings{})
	fileErr(t, err, CodeNULByte, 1)
}

func TestReaderInvalidUTF16(t *testing.T) {
	// Unpaired high surrogate on line 3.
	units := utf16.Encode([]rune("\uFEFF" + hdr + "E1,2026-03,BASE,1,USD\nE"))
	units = append(units, 0xD800, 'x', '\n')
	var b bytes.Buffer
	for _, u := range units {
		b.WriteByte(byte(u))
		b.WriteByte(byte(u >> 8))
	}
	_, err := readAll(t, bytes.NewReader(b.Bytes()), Settings{})
	fileErr(t, err, CodeInvalidEncoding, 3)
	// Odd byte count.
	odd := append(encodeUTF16(hdr+"E1,2026-03,BASE,1,USD\n", true), 'x')
	_, err = readAll(t, bytes.NewReader(odd), Settings{})
	fileErr(t, err, CodeInvalidEncoding, -1)
}

func TestReaderDelimiters(t *testing.T) {
	tests := []struct {
		name, in string
		s        Settings
		want     rune
	}{
		{"semicolon detected", "employee_ref;pay_period;component;amount;currency\nE1;2026-03;BASE;1,50;EUR\n", Settings{DecimalComma: true}, ';'},
		{"tab detected", "employee_ref\tpay_period\tcomponent\tamount\tcurrency\nE1\t2026-03\tBASE\t1.50\tEUR\n", Settings{}, '\t'},
		{"pipe detected", "employee_ref|pay_period|component|amount|currency\nE1|2026-03|BASE|1.50|EUR\n", Settings{}, '|'},
		{"commas in quotes ignored", "\"a,b,c,d,e,f\";employee_ref;pay_period;component;amount;currency\nx;E1;2026-03;BASE;1,50;EUR\n", Settings{DecimalComma: true}, ';'},
		{"partner delimiter wins", "employee_ref;pay_period;component;amount;currency\nE1;2026-03;BASE;1,50;EUR\n", Settings{Delimiter: ';', DecimalComma: true}, ';'},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd, err := NewReader(strings.NewReader(tc.in), tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if rd.Delimiter() != tc.want {
				t.Fatalf("delimiter %q", rd.Delimiter())
			}
			row, err := rd.Next()
			if err != nil || row.Err != nil || row.Record.AmountString() != "1.50" {
				t.Fatalf("row %+v %v", row, err)
			}
		})
	}
	if _, err := NewReader(strings.NewReader(hdr), Settings{Delimiter: '"'}); err == nil {
		t.Error("quote as delimiter accepted")
	}
}

func TestReaderLines(t *testing.T) {
	in := hdr +
		"E1,2026-03,\"multi\nline\ncomponent\",1,USD\n" + // line 2-4
		"\n" + // line 5 blank
		"E2,2026-03,BASE,1,USD\n" + // line 6
		",,,,\n" + // line 7 all empty: skipped
		"E3,2026-03,BASE,1,USD,,,\n" + // line 8 trailing empty cells
		"E4,2026-03,BASE,1,USD,,extra\n" + // line 9 too many cells
		"E5,2026-03,BA\"SE,1,USD\n" + // line 10 bare quote
		"E6,2026-03,BASE,1,USD\r\n" + // line 11
		"E7,2026-03,BASE\n" // line 12 short row
	rows := mustRows(t, in, Settings{})
	want := []struct {
		line, index int
		code        Code
		ref         string
	}{
		{2, 1, "", "E1"},
		{6, 2, "", "E2"},
		{8, 3, "", "E3"},
		{9, 4, CodeTooManyCells, ""},
		{10, 5, CodeMalformedRow, ""},
		{11, 6, "", "E6"},
		{12, 7, CodeMissingValue, ""},
	}
	if len(rows) != len(want) {
		for _, r := range rows {
			t.Logf("%+v", r)
		}
		t.Fatalf("got %d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		var code Code
		if r.Err != nil {
			code = r.Err.Code
		}
		if r.Line != w.line || r.Index != w.index || code != w.code || (w.code == "" && r.Record.EmployeeRef != w.ref) {
			t.Errorf("row %d: line %d index %d code %q ref %q; want %+v (%v)", i, r.Line, r.Index, code, r.Record.EmployeeRef, w, r.Err)
		}
	}
	if rows[0].Record.Component != "MULTI\nLINE\nCOMPONENT" {
		t.Errorf("component %q", rows[0].Record.Component)
	}
	if rows[3].Display.EmployeeRef != "E4" {
		t.Errorf("too_many_cells display %+v", rows[3].Display)
	}
	if rows[6].Err.Field != FieldCurrency { // currency is checked before amount
		t.Errorf("short row field %q", rows[6].Err.Field)
	}
}

func TestReaderHeaders(t *testing.T) {
	ok := []string{
		"Employee Ref,Pay Period,Component,Amount,Currency\n",
		" employee-ref ,PAY_PERIOD,COMPONENT,amount,currency\n",
		"EMPLOYEE_REF,pay-period,Component,AMOUNT,Currency,Notes,hours,Rate,Pay Date\n",
		"notes,currency,amount,component,pay_period,employee_ref\n",
		"\n\nemployee_ref,pay_period,component,amount,currency\n",
	}
	for _, h := range ok {
		rd, err := NewReader(strings.NewReader(h+"\n"), Settings{})
		if err != nil {
			t.Errorf("header %q: %v", h, err)
			continue
		}
		if _, err := rd.Next(); err != io.EOF {
			t.Errorf("header %q: Next %v", h, err)
		}
	}
	// Column order and extra columns are respected.
	rows := mustRows(t, "notes,Currency,Amount,Component,Pay Period,Employee Ref,Hours,Rate,Pay-Date\nhello,eur,\"1,500\",base,2026-03,E9,8,2,2026-03-31\n", Settings{})
	r := rows[0]
	if r.Err != nil || r.Record.EmployeeRef != "E9" || r.Record.Component != "BASE" || r.Record.PayPeriod != "2026-03" || r.Record.AmountString() != "1500.00" ||
		r.Record.Currency != "EUR" || r.Record.HoursString() != "8" || r.Record.RateString() != "2.00" || r.Record.PayDate != "2026-03-31" {
		t.Fatalf("row %+v %v", r.Record.Fields(), r.Err)
	}
}

func TestReaderHeaderErrors(t *testing.T) {
	tests := []struct {
		name, in string
		s        Settings
		code     Code
		field    string
	}{
		{"empty file", "", Settings{}, CodeEmptyFile, ""},
		{"only BOM", "\xef\xbb\xbf", Settings{}, CodeEmptyFile, ""},
		{"only blank lines", "\n\r\n  \n", Settings{}, CodeEmptyFile, ""},
		{"missing amount", "employee_ref,pay_period,component,currency\n", Settings{}, CodeMissingColumn, FieldAmount},
		{"missing currency", "employee_ref,pay_period,component,amount\n", Settings{}, CodeMissingColumn, FieldCurrency},
		{"duplicate", "employee_ref,pay_period,component,amount,currency,Employee Ref\n", Settings{}, CodeDuplicateColumn, FieldEmployeeRef},
		{"malformed header", "employee_ref,\"pay_period\"x,component,amount,currency\n", Settings{}, CodeMalformedRow, ""},
		{"too many header columns", hdr[:len(hdr)-1] + strings.Repeat(",x", 10) + "\n", Settings{MaxCells: 10}, CodeTooManyColumns, ""},
		{"header too long", hdr, Settings{MaxLineBytes: 20}, CodeLineTooLong, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(strings.NewReader(tc.in), tc.s)
			fe := fileErr(t, err, tc.code, -1)
			if fe.Field != tc.field {
				t.Errorf("field %q, want %q", fe.Field, tc.field)
			}
		})
	}
}

func TestReaderDefaultCurrency(t *testing.T) {
	rows := mustRows(t, "employee_ref,pay_period,component,amount\nE1,2026-03,BASE,1000\n", Settings{Currency: "JPY"})
	if rows[0].Err != nil || rows[0].Record.Currency != "JPY" || rows[0].Record.AmountString() != "1000" {
		t.Fatalf("%+v", rows[0])
	}
	rows = mustRows(t, hdr+"E1,2026-03,BASE,1000,\nE2,2026-03,BASE,1000,usd\n", Settings{Currency: "JPY"})
	if rows[0].Record.Currency != "JPY" || rows[1].Record.Currency != "USD" {
		t.Fatalf("%+v", rows)
	}
}

func TestReaderLimitsMidStream(t *testing.T) {
	long := hdr + "E1,2026-03,BASE,1,USD\nE2,2026-03,BASE,1,USD," + strings.Repeat("x", 200) + "\n"
	rows, err := readAll(t, strings.NewReader(long), Settings{MaxLineBytes: 100})
	fileErr(t, err, CodeLineTooLong, 3)
	if len(rows) != 1 {
		t.Errorf("rows before the error: %d", len(rows))
	}
	many := hdr + "E1,2026-03,BASE,1,USD" + strings.Repeat(",", 20) + "\n"
	_, err = readAll(t, strings.NewReader(many), Settings{MaxCells: 20})
	fileErr(t, err, CodeTooManyColumns, 2)
	// The error is sticky.
	rd, _ := NewReader(strings.NewReader(many), Settings{MaxCells: 20})
	_, e1 := rd.Next()
	_, e2 := rd.Next()
	if e1 == nil || e1 != e2 {
		t.Errorf("not sticky: %v / %v", e1, e2)
	}
}

func TestReaderMalformedContinues(t *testing.T) {
	rows := mustRows(t, hdr+"E1,2026-03,\"BASE\"x,1,USD\nE2,2026-03,BASE,1,USD\n", Settings{})
	if len(rows) != 2 || rows[0].Err == nil || rows[0].Err.Code != CodeMalformedRow || rows[1].Err != nil || rows[1].Line != 3 {
		t.Fatalf("%+v", rows)
	}
}

// genReader synthesises a CSV file of n rows on the fly, never holding it.
type genReader struct {
	n, i int
	buf  []byte
}

func newGen(n int) *genReader { return &genReader{n: n, buf: []byte(hdr)} }

func (g *genReader) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		if g.i >= g.n {
			return 0, io.EOF
		}
		g.i++
		g.buf = fmt.Appendf(g.buf[:0], "E%07d,2026-%02d,BASE,\"%d,%03d.%02d\",USD\n", g.i, g.i%12+1, g.i%999+1, g.i%1000, g.i%100)
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func TestReaderStreaming(t *testing.T) {
	const n = 200_000
	rd, err := NewReader(newGen(n), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for {
		row, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if row.Err != nil {
			t.Fatalf("row %d: %v", row.Index, row.Err)
		}
		count++
		if row.Index != count || row.Line != count+1 {
			t.Fatalf("row %d at line %d, want %d/%d", row.Index, row.Line, count, count+1)
		}
	}
	if count != n {
		t.Fatalf("counted %d rows, want %d", count, n)
	}
}

func BenchmarkReader(b *testing.B) {
	const n = 100_000
	var buf bytes.Buffer
	_, _ = io.Copy(&buf, newGen(n))
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		rd, err := NewReader(bytes.NewReader(data), Settings{})
		if err != nil {
			b.Fatal(err)
		}
		rows := 0
		for {
			row, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil || row.Err != nil {
				b.Fatal(err, row.Err)
			}
			rows++
		}
		if rows != n {
			b.Fatal(rows)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// The partner's date format applies to every row a Reader reads (it is
// parsed once, in NewReader); ISO dates still pass, other forms do not.
func TestReaderPartnerDateFormat(t *testing.T) {
	in := "employee_ref,pay_period,component,amount,currency,pay_date\n" +
		"E1,2026-11,BASE,1.00,USD,30.11.2026\n" +
		"E2,2026-11,BASE,1.00,USD,2026-11-29\n" +
		"E3,2026-11,BASE,1.00,USD,11/30/2026\n" +
		"E4,2026-11,BASE,1.00,USD,31.02.2026\n"
	rows, err := readAll(t, strings.NewReader(in), Settings{DateFormat: "DD.MM.YYYY"})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		date string
		code Code
	}{{"2026-11-30", ""}, {"2026-11-29", ""}, {"", CodeInvalidDate}, {"", CodeInvalidDate}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		var code Code
		if rows[i].Err != nil {
			code = rows[i].Err.Code
		}
		if rows[i].Record.PayDate != w.date || code != w.code {
			t.Errorf("row %d: date %q code %q, want %q %q", i+1, rows[i].Record.PayDate, code, w.date, w.code)
		}
	}
}
