package normalize

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// The columns of an employee mapping file (payintake employees import).
const (
	FieldEmployeeID   = "employee_id"
	FieldEmployeeName = "name"
)

// EmployeeRow is one row of an employee mapping file: a partner's
// employee_ref, the platform's employee_id for that worker and an optional
// display name. Err is set, and the values are raw, when the row is invalid.
type EmployeeRow struct {
	Line                          int // physical line where the row starts; the header is line 1
	EmployeeRef, EmployeeID, Name string
	Err                           *RowError
}

// ReadEmployees reads a whole employee mapping file: CSV with the columns
// employee_ref, employee_id and optionally name, in any order, the header
// matched as a payroll file's is (case, spaces, '_' and '-' ignored),
// decoded and delimited as a payroll file is. employee_ref is normalised
// exactly as in payroll files; employee_id is trimmed, case kept, and must
// be a plain identifier. Blank rows are skipped. It returns a *ParseError for
// a file that cannot be used, with every row otherwise (invalid ones with
// Err set).
func ReadEmployees(r io.Reader) ([]EmployeeRow, error) {
	var s Settings
	text, err := decodeInput(r, s.maxLineBytes())
	if err != nil {
		return nil, err
	}
	head, err := readHeaderLine(text, s.maxLineBytes())
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(head)) == 0 {
		return nil, &ParseError{Err: CodeEmptyFile, Message: "the file is empty or has no header line; send a CSV file whose first line is employee_ref,employee_id,name"}
	}
	cr := csv.NewReader(io.MultiReader(bytes.NewReader(head), text))
	cr.Comma = detectDelimiter(head)
	cr.FieldsPerRecord = -1
	names := []string{FieldEmployeeRef, FieldEmployeeID, FieldEmployeeName}
	var cols map[string]int
	nHeader := 0
	var rows []EmployeeRow
	for {
		rec, err := cr.Read()
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			if cols == nil {
				return nil, &ParseError{StartLine: pe.StartLine, Line: pe.Line, Column: pe.Column, Err: Cause(CodeMalformedRow, pe), Message: fmt.Sprintf(
					"the header line cannot be read as CSV (%v); fix the quoting of the header", pe.Err)}
			}
			rows = append(rows, EmployeeRow{Line: pe.StartLine, Err: &RowError{Code: CodeMalformedRow, Err: pe, Message: fmt.Sprintf(
				"the row cannot be read as CSV (%v at line %d, column %d); quote cells that contain quotes, delimiters or line breaks", pe.Err, pe.Line, pe.Column)}})
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			var fe *ParseError
			if errors.As(err, &fe) {
				return nil, fe
			}
			return nil, fmt.Errorf("read employee file: %w", err)
		}
		line, _ := cr.FieldPos(0)
		rec = trimTrailingEmpty(rec)
		if len(rec) == 0 {
			continue
		}
		if cols == nil {
			if cols, err = employeeColumns(rec, names, line); err != nil {
				return nil, err
			}
			nHeader = len(rec)
			continue
		}
		rows = append(rows, employeeRow(rec, cols, nHeader, line))
	}
	if cols == nil {
		return nil, &ParseError{Err: CodeEmptyFile, Message: "the file has no header line; send a CSV file whose first line is employee_ref,employee_id,name"}
	}
	return rows, nil
}

func employeeColumns(rec, names []string, line int) (map[string]int, error) {
	cols := map[string]int{}
	for i, h := range rec {
		c := matchColumn(h, names)
		if c == "" {
			continue
		}
		if j, dup := cols[c]; dup {
			return nil, &ParseError{StartLine: line, Line: line, Err: CodeDuplicateColumn, Field: c, Message: fmt.Sprintf(
				"the header has %s twice (columns %d and %d); keep only one of them", c, j+1, i+1)}
		}
		cols[c] = i
	}
	for _, f := range names[:2] {
		if _, ok := cols[f]; !ok {
			return nil, &ParseError{StartLine: line, Line: line, Err: CodeMissingColumn, Field: f, Message: fmt.Sprintf(
				"the header has no %s column; the header of an employee file is employee_ref,employee_id,name (name optional)", f)}
		}
	}
	return cols, nil
}

func employeeRow(rec []string, cols map[string]int, nHeader, line int) EmployeeRow {
	cell := func(f string) string {
		if j, ok := cols[f]; ok && j < len(rec) {
			return rec[j]
		}
		return ""
	}
	row := EmployeeRow{Line: line, EmployeeRef: cell(FieldEmployeeRef), EmployeeID: cell(FieldEmployeeID), Name: normText(cell(FieldEmployeeName))}
	ref, rerr := normEmployeeRef(row.EmployeeRef)
	if rerr != nil {
		row.Err = rerr
		return row
	}
	row.EmployeeRef = ref
	id, ierr := normEmployeeID(row.EmployeeID)
	if ierr != nil {
		row.Err = ierr
		return row
	}
	row.EmployeeID = id
	if len(rec) > nHeader {
		row.Err = &RowError{Code: CodeTooManyCells, Message: fmt.Sprintf(
			"the row has %d cells but the header has %d columns; remove the extra cells or quote values that contain the delimiter", len(rec), nHeader)}
	}
	return row
}

// normEmployeeID trims an employee_id and checks it is an identifier: not
// empty, at most 128 characters, no control characters, not mangled into
// scientific notation by a spreadsheet.
func normEmployeeID(raw string) (string, *RowError) {
	v := normText(raw)
	if v == "" {
		return "", &RowError{Code: CodeMissingValue, Field: FieldEmployeeID, Message: "employee_id is empty; give the platform's id of this employee"}
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return "", &RowError{Code: CodeInvalidIdentifier, Field: FieldEmployeeID, Message: fmt.Sprintf(
			"employee_id %s holds a control character; send the id as plain text", quoteRaw(v))}

	}
	if looksScientific(v) {
		return "", &RowError{Code: CodeMangledIdentifier, Field: FieldEmployeeID, Message: fmt.Sprintf(
			"employee_id %s looks like a number a spreadsheet turned into scientific notation; format the column as text and export the file again", quoteRaw(v))}

	}
	if e := checkIdent(v, FieldEmployeeID); e != nil {
		return "", e
	}
	return v, nil
}
