package records

import (
	"fmt"
)

// Statements returns every named statement of the .sql files, fragments
// expanded, by name, for the tests that check them against the schema.
func Statements() map[string]string { return statements.Statements() }

// TempTables are the temporary tables the processing statements read
// (classify.go, apply.go), in the order they are created.
var TempTables = []string{stageDDL, classifiedDDL, empRefsDDL, employeesDDL}

// ClassifyForms returns every form of classify's statement (duplicate
// check and joins), by a name saying which.
func ClassifyForms() map[string]string {
	out := map[string]string{}
	for dup, forms := range classifySQLs {
		for j, sql := range forms {
			out[fmt.Sprintf("dup %d, emp %t, locks %t", dup, classifyJoins(j)&joinEmp != 0, classifyJoins(j)&joinLocks != 0)] = sql
		}
	}
	return out
}

// ChunkSize is the most bytes one envelope_chunks row holds (the last
// chunk of an envelope holds fewer).
const ChunkSize = chunkSize

// EmpRefsSQL is empRefsSQL: a file's unmapped employees into emp.
const EmpRefsSQL = empRefsSQL

// BinaryNumericDates is a binary COPY stream of rows of (numeric, date)
// as the records of a first file read twice encode them (copybinary.go).
func BinaryNumericDates(rows [][2]string) ([]byte, error) {
	b := append([]byte(nil), copyBinaryHeader...)
	for _, r := range rows {
		b = appendInt16(b, 2)
		var err error
		if b, err = appendBinaryNumeric(b, r[0]); err != nil {
			return nil, fmt.Errorf("numeric %q: %w", r[0], err)
		}
		if b, err = appendBinaryDate(b, r[1]); err != nil {
			return nil, fmt.Errorf("date %q: %w", r[1], err)
		}
	}
	return append(b, copyBinaryTrailer...), nil
}

// ProcessSettingsSQL is the processing transaction's settings statement.
const ProcessSettingsSQL = processSettingsSQL
