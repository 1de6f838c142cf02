package workbook

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/workbook/workbooktest"
)

var openpyxl = workbooktest.Openpyxl

func readSheet(t *testing.T, b []byte, opt Options) ([][]string, []int, error) {
	t.Helper()
	sh, err := Open(bytes.NewReader(b), opt)
	if err != nil {
		return nil, nil, err
	}
	defer sh.Close()
	var rows [][]string
	var lines []int
	for {
		cells, line, err := sh.Row()
		if err == io.EOF {
			return rows, lines, nil
		}
		if err != nil {
			return rows, lines, err
		}
		rows = append(rows, slices.Clone(cells))
		lines = append(lines, line)
	}
}

func TestReadsTheNamedSheetAsText(t *testing.T) {
	b := openpyxl(t, workbooktest.Payroll)
	rows, lines, err := readSheet(t, b, Options{Sheet: "payroll"})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"Employee Ref", "Pay Period", "Component", "Amount", "Currency", "Pay Date"},
		{"00123", "2026-11", "BASE", "4000", "USD", "2026-11-30"},
		{"00124", "2026-11", "BONUS", "0.07", "USD", "2026-11-30"},
		{"00125", "2026-11", "BASE", "100000.1", "EUR", "2026-12-01"},
		{"00126", "2026-11", "OVERTIME", "500", "USD", "2026-11-30"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Fatalf("rows:\n%q\nwant\n%q", rows, want)
	}
	// The empty row 4 is not given; line numbers are the sheet's rows.
	if !slices.Equal(lines, []int{1, 2, 3, 5, 6}) {
		t.Fatalf("lines %v, want the sheet's row numbers [1 2 3 5 6]", lines)
	}
}

func TestReadsTheFirstSheetByDefault(t *testing.T) {
	b := openpyxl(t, workbooktest.Payroll)
	rows, _, err := readSheet(t, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0][0] != "November payroll, exported from the HR system" {
		t.Fatalf("the first sheet (Notes) should be read by default, got %q", rows)
	}
}

func TestMissingSheetNamesTheSheets(t *testing.T) {
	b := openpyxl(t, workbooktest.Payroll)
	_, err := Open(bytes.NewReader(b), Options{Sheet: "Lines"})
	var pe *normalize.ParseError
	if !errors.As(err, &pe) || !errors.Is(err, normalize.CodeMissingSheet) {
		t.Fatalf("err = %v, want a missing_sheet ParseError", err)
	}
	if !strings.Contains(pe.Message, `"Notes", "Payroll"`) {
		t.Fatalf("message %q should list the workbook's sheets", pe.Message)
	}
}

func TestPartnersConventions(t *testing.T) {
	b := openpyxl(t, workbooktest.Payroll)
	rows, _, err := readSheet(t, b, Options{Sheet: "Payroll", DecimalComma: true, DateFormat: "YYYY-DD-MM"})
	if err != nil {
		t.Fatal(err)
	}
	if rows[2][3] != "0,07" || rows[3][5] != "2026-01-12" {
		t.Fatalf("rows %q: amounts should have a decimal comma, dates the partner's format", rows[2:4])
	}
	// Through normalize with the same settings: the same records as ISO.
	sh, err := Open(bytes.NewReader(b), Options{Sheet: "Payroll", DateFormat: "YYYY-DD-MM"})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	rd, err := normalize.NewRowsReader(sh, normalize.Settings{DateFormat: "YYYY-DD-MM"})
	if err != nil {
		t.Fatal(err)
	}
	var dates []string
	for {
		row, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil || row.Err != nil {
			t.Fatal(err, row.Err)
		}
		dates = append(dates, row.Record.PayDate)
	}
	if fmt.Sprint(dates) != "[2026-11-30 2026-11-30 2026-12-01 2026-11-30]" {
		t.Fatalf("pay dates %v, want the sheet's", dates)
	}
}

func TestReadsThroughNormalizeAsTheSameCSV(t *testing.T) {
	b := openpyxl(t, workbooktest.Payroll)
	sh, err := Open(bytes.NewReader(b), Options{Sheet: "Payroll"})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	fromBook := normalized(t, func() (*normalize.Reader, error) { return normalize.NewRowsReader(sh, normalize.Settings{}) })
	csv := workbooktest.PayrollCSV
	fromCSV := normalized(t, func() (*normalize.Reader, error) {
		return normalize.NewReader(strings.NewReader(csv), normalize.Settings{})
	})
	if len(fromBook) != 4 || !slices.Equal(fromBook, fromCSV) {
		t.Fatalf("records from the workbook\n%v\ndiffer from the CSV's\n%v", fromBook, fromCSV)
	}
}

// normalized gives each row's line, record and error, as text.
func normalized(t *testing.T, open func() (*normalize.Reader, error)) []string {
	t.Helper()
	rd, err := open()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		row, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if row.Err != nil {
			t.Fatalf("line %d: %v", row.Line, row.Err)
		}
		h := row.Record.Hash()
		out = append(out, fmt.Sprintf("line %d %s %x", row.Line, row.Record.Canonical(), h))
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		code         normalize.Code
		line         int
		says         string
	}{
		{"formula without a cached value", `
wb = Workbook(); ws = wb.active
ws.append(["employee_ref", "pay_period", "component", "amount", "currency"])
ws.append(["E1", "2026-11", "BASE", 100, "USD"])
ws.append(["E2", "2026-11", "BASE", "=D2*2", "USD"])
wb.save(OUT)`, normalize.CodeUncalculatedFormula, 3, "cell D3"},
		{"cell showing an error", `
wb = Workbook(); ws = wb.active
ws.append(["employee_ref", "pay_period", "component", "amount", "currency"])
ws.append(["=VLOOKUP(9,A1:A1,1,FALSE)", "2026-11", "BASE", 100, "USD"])
wb.save(OUT)
cache(OUT, ws.title, "A2", "#N/A")
z = zipfile.ZipFile(OUT); parts = {n: z.read(n) for n in z.namelist()}; z.close()
parts["xl/worksheets/sheet1.xml"] = parts["xl/worksheets/sheet1.xml"].replace(b'<c r="A2">', b'<c r="A2" t="e">')
with zipfile.ZipFile(OUT, "w") as z:
    for n, b in parts.items(): z.writestr(n, b)`, normalize.CodeFormulaError, 2, "cell A2 of sheet \"Sheet\" shows the error #N/A"},
		{"empty header cell", `
wb = Workbook(); ws = wb.active
ws.append(["employee_ref", "pay_period", None, "component", "amount", "currency"])
ws.append(["E1", "2026-11", "x", "BASE", 100, "USD"])
wb.save(OUT)`, normalize.CodeInvalidHeaderCell, 1, "header cell C1"},
		{"merged header cells", `
wb = Workbook(); ws = wb.active
ws.append([])
ws.append(["employee_ref", "pay_period", "component", "amount", "currency", "Notes"])
ws.append(["E1", "2026-11", "BASE", 100, "USD"])
ws.merge_cells("F2:G2")
wb.save(OUT)`, normalize.CodeInvalidHeaderCell, 2, "F2:G2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readSheet(t, openpyxl(t, tc.script), Options{})
			var pe *normalize.ParseError
			if !errors.As(err, &pe) || !errors.Is(err, tc.code) {
				t.Fatalf("err = %v, want a %s ParseError", err, tc.code)
			}
			if pe.StartLine != tc.line || !strings.Contains(pe.Message, tc.says) {
				t.Fatalf("err = %v (line %d), want line %d and a message naming %s", err, pe.StartLine, tc.line, tc.says)
			}
		})
	}
}

func TestNotAWorkbook(t *testing.T) {
	for name, b := range map[string][]byte{
		"CSV":       []byte("employee_ref,amount\nE1,1\n"),
		"xls / OLE": append(slices.Clone(oleMagic), make([]byte, 512)...),
	} {
		_, err := Open(bytes.NewReader(b), Options{})
		if !errors.Is(err, normalize.CodeInvalidWorkbook) {
			t.Errorf("%s: err = %v, want invalid_workbook", name, err)
		}
	}
}

func TestNumberText(t *testing.T) {
	for in, want := range map[string]string{
		"0.07": "0.07", "100000.1": "100000.1", "4000": "4000", "-12.5": "-12.5",
		"2.50": "2.5", "1E-3": "0.001", "1.5E+2": "150", "0.30000000000000004": "0.3",
		"1234567.8899999999": "1234567.89", "123456789012345678": "1.23456789012346E+17", "-1E+20": "-1E+20", "999999999999999": "999999999999999",
	} {
		if got, ok := numberText(in); !ok || got != want {
			t.Errorf("numberText(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestSerials(t *testing.T) {
	for _, tc := range []struct {
		in       string
		date1904 bool
		want     string
	}{
		{"46356", false, "2026-11-30"}, {"1", false, "1900-01-01"}, {"59", false, "1900-02-28"},
		{"61", false, "1900-03-01"}, {"46356.5", false, "2026-11-30T12:00:00"}, {"44894", true, "2026-11-30"},
	} {
		if got, ok := serialDate(tc.in, tc.date1904); !ok || got != tc.want {
			t.Errorf("serialDate(%q, %v) = %q; want %q", tc.in, tc.date1904, got, tc.want)
		}
	}
	if got, _ := serialTime("0.3125"); got != "7:30:00" {
		t.Errorf("serialTime(0.3125) = %q, want 7:30:00", got)
	}
	for code, kind := range map[string]formatKind{
		"yyyy-mm-dd": kindDate, "dd/mm/yyyy": kindDate, "[$-409]mmmm d, yyyy": kindDate, "h:mm": kindTime,
		"[h]:mm:ss": kindTime, `"$"#,##0.00`: kindNumber, "0.00%": kindNumber, "00000": kindZeroPadded, "General": kindNumber,
	} {
		if got := formatOfCode(code).kind; got != kind {
			t.Errorf("formatOfCode(%q) = %d, want %d", code, got, kind)
		}
	}
}

func TestSharedStringsAndPaddedNumbers(t *testing.T) {
	b := openpyxl(t, `
wb = Workbook(); ws = wb.active
ws.append(["employee_ref", "hours"])
ws.append([123, 0.3125])
ws["A2"].number_format = "00000"
ws["B2"].number_format = "h:mm"
wb.save(OUT)
# Excel keeps text in the shared string table; openpyxl writes it inline:
# move the header there as Excel would.
z = zipfile.ZipFile(OUT); parts = {n: z.read(n) for n in z.namelist()}; z.close()
x = parts["xl/worksheets/sheet1.xml"].decode()
x = x.replace('<c r="A1" t="inlineStr"><is><t>employee_ref</t></is></c>', '<c r="A1" t="s"><v>1</v></c>')
x = x.replace('<c r="B1" t="inlineStr"><is><t>hours</t></is></c>', '<c r="B1" t="s"><v>0</v></c>')
parts["xl/worksheets/sheet1.xml"] = x.encode()
parts["xl/sharedStrings.xml"] = b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="2" uniqueCount="2"><si><r><t>ho</t></r><r><t>urs</t></r><rPh sb="0" eb="1"><t>HO</t></rPh></si><si><t>employee_ref</t></si></sst>'
parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(b'</Types>', b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>')
parts["xl/_rels/workbook.xml.rels"] = parts["xl/_rels/workbook.xml.rels"].replace(b'</Relationships>', b'<Relationship Id="rIdS" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>')
with zipfile.ZipFile(OUT, "w", zipfile.ZIP_DEFLATED) as z:
    for n, b in parts.items(): z.writestr(n, b)
`)
	rows, _, err := readSheet(t, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"employee_ref", "hours"}, {"00123", "7:30:00"}}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Fatalf("rows %q, want %q: shared strings resolved (rich runs joined, phonetics left out), "+
			"a number formatted 00000 padded as shown, a time not read as a fraction of a day", rows, want)
	}
}
