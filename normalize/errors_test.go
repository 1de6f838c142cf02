package normalize

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

const errHeader = "employee_ref,pay_period,component,amount,currency\n"

// A header encoding/csv cannot read: a *ParseError whose code and cause
// (the *csv.ParseError, with its line and column) are both reachable, and
// whose message is the one partners saw before, now with its column.
func TestParseErrorWrapsCSVHeaderError(t *testing.T) {
	header := `employee_ref,pay_"period,component,amount,currency` + "\n"
	col := strings.IndexByte(header, '"') + 1 // 1-based byte column of the bare quote
	_, err := NewReader(strings.NewReader(header+"E1,2026-11,BASE,1.00,USD\n"), Settings{})
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *ParseError, got %T %v", err, err)
	}
	if pe.StartLine != 1 || pe.Line != 1 || pe.Column != col || pe.Code() != CodeMalformedRow {
		t.Errorf("got start line %d line %d column %d code %s; want 1 1 %d malformed_row", pe.StartLine, pe.Line, pe.Column, pe.Code(), col)
	}
	if !errors.Is(err, CodeMalformedRow) || !errors.Is(err, csv.ErrBareQuote) {
		t.Errorf("errors.Is(err, CodeMalformedRow) = %v, errors.Is(err, csv.ErrBareQuote) = %v; want both", errors.Is(err, CodeMalformedRow), errors.Is(err, csv.ErrBareQuote))
	}
	if errors.Is(err, CodeMissingColumn) || errors.Is(err, CodeTooManyColumns) {
		t.Error("the error matches another code")
	}
	var cpe *csv.ParseError
	if !errors.As(err, &cpe) || cpe.Line != 1 || cpe.Column != col {
		t.Errorf("cause %v, want the *csv.ParseError at line 1, column %d", cpe, col)
	}
	want := fmt.Sprintf("line 1: malformed_row: the header line cannot be read as CSV (%v at line 1, column %d); fix the quoting of the header", csv.ErrBareQuote, col)
	if err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}

// A row encoding/csv cannot read is rejected alone; its *RowError matches
// its code and wraps the *csv.ParseError.
func TestRowErrorWrapsCSVRowError(t *testing.T) {
	row := `E001,2026-11,BA"SE,10.00,USD`
	col := strings.IndexByte(row, '"') + 1
	rd, err := NewReader(strings.NewReader(errHeader+row+"\nE002,2026-11,BASE,1.00,USD\n"), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rd.Next()
	if err != nil || r.Err == nil {
		t.Fatalf("row %+v, err %v: want a rejected row", r, err)
	}
	if !errors.Is(r.Err, CodeMalformedRow) || !errors.Is(r.Err, csv.ErrBareQuote) || errors.Is(r.Err, CodeTooManyCells) {
		t.Errorf("errors.Is: malformed_row %v, bare quote %v, too_many_cells %v; want true true false",
			errors.Is(r.Err, CodeMalformedRow), errors.Is(r.Err, csv.ErrBareQuote), errors.Is(r.Err, CodeTooManyCells))
	}
	var cpe *csv.ParseError
	if !errors.As(r.Err, &cpe) || cpe.StartLine != 2 || cpe.Line != 2 || cpe.Column != col {
		t.Errorf("cause %+v, want the *csv.ParseError at line 2, column %d", cpe, col)
	}
	if want := fmt.Sprintf("(%v at line 2, column %d)", csv.ErrBareQuote, col); !strings.Contains(r.Err.Message, want) {
		t.Errorf("message %q lacks %q", r.Err.Message, want)
	}
	// A row error of Normalize's own: its code, and no cause.
	if r, err = rd.Next(); err != nil || r.Err != nil {
		t.Fatalf("second row %+v %v", r, err)
	}
	_, _, rowErr := Normalize(RawRow{EmployeeRef: "E1", PayPeriod: "2026-11", Component: "BASE", Amount: "1.005", Currency: "USD"}, Settings{})
	if !errors.Is(rowErr, CodeTooManyDecimals) || errors.Is(rowErr, CodeInvalidAmount) {
		t.Errorf("Normalize error %v: want too_many_decimals only", rowErr)
	}
}

// File-level errors found mid-stream say where: too_many_columns points at
// the first cell beyond the limit, an encoding error at its line.
func TestParseErrorLineAndColumn(t *testing.T) {
	row := "E1,2026-11,BASE,1.00,USD,a,b,c,d,e"
	col := 0 // 1-based column of the 9th cell: one past the 8th comma
	for i, n := 0, 0; i < len(row); i++ {
		if row[i] == ',' {
			if n++; n == 8 {
				col = i + 2
				break
			}
		}
	}
	rd, err := NewReader(strings.NewReader(errHeader+"E0,2026-11,BASE,1.00,USD\n"+row+"\n"), Settings{MaxCells: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	_, err = rd.Next()
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, CodeTooManyColumns) {
		t.Fatalf("want too_many_columns, got %T %v", err, err)
	}
	if pe.StartLine != 3 || pe.Line != 3 || pe.Column != col {
		t.Errorf("at line %d/%d column %d, want 3/3 column %d", pe.StartLine, pe.Line, pe.Column, col)
	}
	if !strings.HasPrefix(err.Error(), "line 3: too_many_columns: line 3 has 10 cells, more than the limit of 8") {
		t.Errorf("message %q", err.Error())
	}

	rd, err = NewReader(strings.NewReader(errHeader+"E0,2026-11,BASE,1.00,USD\nE1,2026-11,B\xffASE,1.00,USD\n"), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = rd.Next()
	}
	if err == io.EOF || !errors.Is(err, CodeInvalidEncoding) || !errors.As(err, &pe) || pe.StartLine != 3 || pe.Line != 3 {
		t.Errorf("got %v, want invalid_encoding on line 3", err)
	}
}
