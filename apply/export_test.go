package apply

import "fmt"

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

// EmpRefsSQL is empRefsSQL: a file's unmapped employees into emp.
var EmpRefsSQL = empRefsSQL

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
var ProcessSettingsSQL = processSettingsSQL

// TempTables are the DDL of processing's temporary tables, a compared
// file's stage_keys too.
var TempTables = []string{stageDDL, classifiedDDL, empRefsDDL, empDDL, stageKeysDDL}

// Statements are the statements of apply's .sql files, by name.
func Statements() map[string]string { return statements.Statements() }
