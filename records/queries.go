package records

// The store's SQL lives in .sql files beside the Go file of its aggregate
// (decisions.sql beside decisions.go, …), loaded by internal/sqlfile (which
// says how they are laid out) and taken once, at package initialisation,
// with query("Name"). The column list of a row type is a fragment kept in Go
// beside its scan function (rowFragments). TestEveryQueryPrepares prepares
// each statement against the migrated schema.

import (
	"embed"
	"strings"

	"github.com/payintake/payintake/internal/sqlfile"
	"github.com/payintake/payintake/normalize"
)

//go:embed *.sql
var sqlFiles embed.FS

// rowFragments are the column lists of the row types read by several
// statements, each beside its scan function.
func rowFragments() map[string]string {
	return map[string]string{
		"envelope_columns":  envelopeColumns,
		"exception_columns": exceptionColumns,
		"partner_columns":   partnerColumns,
		"profile_json":      profileJSON,
		"inbox_columns":     inboxColumns,
		"upload_columns":    uploadColumns,
		"record_json":       FieldsJSON("r"),
		"differing":         DifferingSQL("x.proposed", "x.current"),
	}
}

// statements is every named statement and fragment of records/*.sql.
var statements = sqlfile.MustLoad("records", sqlFiles, rowFragments())

// query returns the named statement; an unknown name panics (at package
// initialisation, where every caller asks).
func query(name string) string { return statements.Query(name) }

// fragment returns a fragment of the .sql files, expanded, for SQL still
// composed in Go; an unknown name panics.
func fragment(name string) string { return statements.Fragment(name) }

// DifferingSQL is the SQL for an exception's differing: the names of the
// fields whose values in the FieldsJSON objects proposed and current
// differ, in FieldNames' order.
func DifferingSQL(proposed, current string) string {
	return `ARRAY(SELECT f.name FROM unnest(ARRAY['` + strings.Join(normalize.FieldNames, "', '") + `']) WITH ORDINALITY AS f(name, i)
		WHERE ` + proposed + ` ->> f.name IS DISTINCT FROM ` + current + ` ->> f.name ORDER BY f.i)`
}

// FieldsJSON is the SQL for the object of the eight normalised fields of the
// row alias (records or classified columns), as exceptions store "current"
// and "proposed": numbers and dates as text, "" for an absent one.
func FieldsJSON(alias string) string {
	a := alias + "."
	return `jsonb_build_object(
		'employee_ref', ` + a + `employee_ref, 'pay_period', ` + a + `pay_period, 'component', ` + a + `component,
		'amount', ` + a + `amount::text, 'currency', ` + a + `currency, 'hours', coalesce(` + a + `hours::text, ''),
		'rate', coalesce(` + a + `rate::text, ''), 'pay_date', coalesce(` + a + `pay_date::text, ''))`
}
