package normalize

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// ResultHeader is the first line of every result file (NAME.result.csv) and
// review report (NAME.review.csv): where the row is, its outcome, the five
// fields a partner recognises it by, and why. The review report is written
// by the database (review_report_csv, migrations/00004), which repeats the
// line; migrations.TestResultHeaderMatches compares the two.
const ResultHeader = "line,row,outcome," + FieldEmployeeRef + "," + FieldPayPeriod + "," + FieldComponent + "," +
	FieldAmount + "," + FieldCurrency + ",code,field,message\n"

// AppendResultLine appends one line of a result file (or review report),
// without its line break, in ResultHeader's columns: line and row as
// numbers, outcome as given (one of the outcome words), then cells — the
// five echoed values employee_ref .. currency, code, field and message —
// each quoted by AppendResultCells ("" is an empty cell). Formula escaping
// (SafeCell) is the caller's: a value is written as given.
//
// The SQL function result_line (migrations/00180) is the same rule for the
// lines the database writes: every line of a result file but those of a
// pure first file, which records composes with this function as the rows
// are staged; migrations.TestResultLineMatchesAppendResultLine runs both. Like
// AppendResultCells, it returns b unchanged and false when a cell's quoting
// depends on the database's locale.
func AppendResultLine(b []byte, line, row int, outcome string, cells [8]string) ([]byte, bool) {
	mark := len(b)
	b = strconv.AppendInt(b, int64(line), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(row), 10)
	b = append(b, ',')
	b = append(b, outcome...)
	b = append(b, ',')
	b, ok := AppendResultCells(b, cells[:]...)
	if !ok {
		return b[:mark], false
	}
	return b, true
}

// AppendResultCells appends cells to b as consecutive cells of a result
// file line, separated by commas, each quoted by the result file's one CSV
// rule: RFC 4180 quoting (the cell in double quotes, inner quotes doubled)
// when the cell holds a double quote, comma, CR or LF, or starts or ends
// with white space; otherwise the cell as is. The SQL function csv_field
// (migrations/00001) is the same rule for the cells the database writes;
// migrations.TestCSVFieldMatchesAppendResultCells runs both.
//
// Whether a non-ASCII character is white space depends, in SQL, on the
// database's locale, so when a cell starts or ends with one Go does not
// decide: AppendResultCells then returns b unchanged and false, and the
// caller leaves the quoting to csv_field.
func AppendResultCells(b []byte, cells ...string) ([]byte, bool) {
	mark := len(b)
	for i, v := range cells {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendResultCell(b, v); !ok {
			return b[:mark], false
		}
	}
	return b, true
}

func appendResultCell(b []byte, v string) ([]byte, bool) {
	if v == "" {
		return b, true
	}
	first, last := v[0], v[len(v)-1]
	if first >= utf8.RuneSelf || last >= utf8.RuneSelf {
		return b, false
	}
	quote := isSpaceASCII(first) || isSpaceASCII(last)
	for i := 0; i < len(v) && !quote; i++ {
		quote = v[i] == '"' || v[i] == ',' || v[i] == '\r' || v[i] == '\n'
	}
	if !quote {
		return append(b, v...), true
	}
	b = append(b, '"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, v[i])
	}
	return append(b, '"'), true
}

// isSpaceASCII is the regular expression class \s for ASCII characters.
func isSpaceASCII(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// resultColumns is how many cells every line of a result file has.
const resultColumns = 11

// ResultLine is one line of a result file: its cells in ResultHeader's
// order, and its own bytes without the line break.
type ResultLine struct {
	Header bool // the header line
	Cells  []string
	Raw    []byte
}

// ReadResultLines reads data, whole lines of a result file (a stored chunk
// never ends inside a row), and calls fn for each line in order, the
// header too when data holds it.
func ReadResultLines(data []byte, fn func(ResultLine) error) error {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = resultColumns
	prev := int64(0)
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("parse result: %w", err)
		}
		end := r.InputOffset()
		raw := bytes.TrimRight(data[prev:end], "\r\n")
		prev = end
		if err := fn(ResultLine{Header: rec[0] == "line" && rec[1] == "row", Cells: rec, Raw: raw}); err != nil {
			return err
		}
	}
}

// The formats a result file is served in (a partner profile's results:).
const (
	ResultsCSV      = "csv"       // the result file's lines as they are: UTF-8 without BOM, LF
	ResultsCSVExcel = "csv-excel" // NewExcelResultWriter's form, for Excel on Windows
	ResultsXLSX     = "xlsx"      // a workbook (package workbook)
)

// NewExcelResultWriter writes a result file to w in the form Excel on
// Windows opens as UTF-8 (a profile's results: csv-excel): a UTF-8 BOM
// first, then the lines as given with every line feed written as CR LF
// (a line feed inside a quoted cell too: a CR LF there is still one
// line break in the cell). Its size is the CSV's + 3 + its line feeds.
func NewExcelResultWriter(w io.Writer) io.Writer { return &excelWriter{w: w} }

type excelWriter struct {
	w       io.Writer
	started bool
	buf     []byte
}

func (e *excelWriter) Write(p []byte) (int, error) {
	n := len(p)
	e.buf = e.buf[:0]
	if !e.started {
		e.buf = append(e.buf, 0xEF, 0xBB, 0xBF)
		e.started = true
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			e.buf = append(e.buf, p...)
			break
		}
		e.buf = append(e.buf, p[:i]...)
		e.buf = append(e.buf, '\r', '\n')
		p = p[i+1:]
	}
	if _, err := e.w.Write(e.buf); err != nil {
		return 0, err
	}
	return n, nil
}
