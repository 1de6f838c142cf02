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
// fields a partner recognises it by, and why.
const ResultHeader = "line,row,outcome," + FieldEmployeeRef + "," + FieldPayPeriod + "," + FieldComponent + "," +
	FieldAmount + "," + FieldCurrency + ",code,field,message\n"

// AppendResultLine appends one line of a result file (or review report),
// without its line break, in ResultHeader's columns: line and row as
// numbers, outcome as given (one of the outcome words), then cells — the
// five echoed values employee_ref .. currency, code, field and message —
// each quoted by AppendResultCells ("" is an empty cell). Formula escaping
// (SafeCell) is the caller's: a value is written as given. It is the one
// writer of result lines: every line of a result file and review report
// is composed by it or, for the five echoed cells composed once while the
// rows are staged, by AppendResultCells.
func AppendResultLine(b []byte, line, row int, outcome string, cells [8]string) []byte {
	b = strconv.AppendInt(b, int64(line), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(row), 10)
	b = append(b, ',')
	b = append(b, outcome...)
	b = append(b, ',')
	return AppendResultCells(b, cells[:]...)
}

// AppendResultCells appends cells to b as consecutive cells of a result
// file line, separated by commas, each quoted by the result file's one CSV
// rule: RFC 4180 quoting (the cell in double quotes, inner quotes doubled)
// when the cell holds a double quote, comma, CR or LF, or starts or ends
// with white space (IsResultSpace); otherwise the cell as is.
func AppendResultCells(b []byte, cells ...string) []byte {
	for i, v := range cells {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendResultCell(b, v)
	}
	return b
}

func appendResultCell(b []byte, v string) []byte {
	if v == "" {
		return b
	}
	quote := false
	if first := v[0]; first < utf8.RuneSelf {
		quote = isSpaceASCII(first)
	} else {
		r, _ := utf8.DecodeRuneInString(v)
		quote = IsResultSpace(r)
	}
	if last := v[len(v)-1]; !quote && last < utf8.RuneSelf {
		quote = isSpaceASCII(last)
	} else if !quote {
		r, _ := utf8.DecodeLastRuneInString(v)
		quote = IsResultSpace(r)
	}
	for i := 0; i < len(v) && !quote; i++ {
		quote = v[i] == '"' || v[i] == ',' || v[i] == '\r' || v[i] == '\n'
	}
	if !quote {
		return append(b, v...)
	}
	b = append(b, '"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, v[i])
	}
	return append(b, '"')
}

// IsResultSpace tells whether r is white space at a cell's edge, which
// the result file quotes: ASCII space, \t \n \v \f \r, U+1680,
// U+2000–U+2006, U+2008–U+200A, U+2028, U+2029, U+205F and U+3000 — not
// the no-break spaces U+00A0, U+2007 and U+202F, nor U+0085. It is not
// unicode.IsSpace because it is what every result file written so far
// used: result lines were composed by the database, whose regular
// expression class \s is glibc's iswspace under the embedded cluster's
// C.UTF-8 locale, and a repeat must be answered with the same bytes.
func IsResultSpace(r rune) bool {
	switch {
	case r < utf8.RuneSelf:
		return isSpaceASCII(byte(r))
	case r == 0x1680, r >= 0x2000 && r <= 0x2006, r >= 0x2008 && r <= 0x200A,
		r == 0x2028, r == 0x2029, r == 0x205F, r == 0x3000:
		return true
	}
	return false
}

// isSpaceASCII is IsResultSpace for ASCII characters.
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
