package records

// The store's SQL lives in .sql files beside the Go file of its aggregate
// (decisions.sql beside decisions.go, …), embedded in the binary. Each file
// holds named statements in the layout sqlc and riverqueue/river use:
//
//	-- name: LockPeriodRecords
//	UPDATE records SET locked_reason = $3, locked_at = now()
//	WHERE partner_id = $1 AND pay_period = $2;
//
// and may hold fragments shared by several of its statements:
//
//	-- fragment: queue_where
//	x.partner_id = ANY($1::text[]) AND …
//
// A statement names a fragment as {{queue_where}}. The column list of a row
// type is a fragment kept in Go beside its scan function (rowFragments), so
// the columns a statement reads and the order they are scanned in are
// written in one place. A Go file takes its statements once, at package
// initialisation, with query("Name"): a name that is not in any .sql file
// stops the program (and every test) at start, never at the call.
// TestEveryQueryPrepares prepares each statement against the migrated
// schema.

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
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
		"inbox_columns":     inboxColumns,
		"upload_columns":    uploadColumns,
		"record_json":       FieldsJSON("r"),
	}
}

// statements holds every named statement of the .sql files (key "name X")
// and every fragment (key "fragment x"), fragments expanded. It is written
// once, at package initialisation, and only read.
var statements = mustLoadStatements(sqlFiles, rowFragments())

// query returns the named statement; an unknown name panics (at package
// initialisation, where every caller asks).
func query(name string) string {
	sql, ok := statements["name "+name]
	if !ok {
		panic(fmt.Sprintf("records: no statement named %q in records/*.sql", name))
	}
	return sql
}

// fragment returns a fragment of the .sql files, expanded, for SQL still
// composed in Go; an unknown name panics.
func fragment(name string) string {
	sql, ok := statements["fragment "+name]
	if !ok {
		panic(fmt.Sprintf("records: no fragment named %q in records/*.sql", name))
	}
	return sql
}

var (
	sqlMarker   = regexp.MustCompile(`(?m)^-- (name|fragment): *([A-Za-z_][A-Za-z0-9_]*) *$`)
	sqlFragment = regexp.MustCompile(`\{\{([a-z_]+)\}\}`)
)

func mustLoadStatements(fsys fs.FS, fragments map[string]string) map[string]string {
	st, err := loadStatements(fsys, fragments)
	if err != nil {
		panic("records: " + err.Error())
	}
	return st
}

// loadStatements parses every .sql file of fsys into its named statements.
func loadStatements(fsys fs.FS, fragments map[string]string) (map[string]string, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	named := map[string]string{}
	where := map[string]string{}
	frags := map[string]string{}
	for k, v := range fragments {
		frags[k] = v
	}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		text := string(b)
		marks := sqlMarker.FindAllStringSubmatchIndex(text, -1)
		if len(marks) == 0 || !onlyComments(text[:marks[0][0]]) {
			return nil, fmt.Errorf("%s: every statement must follow a '-- name: X' line", f)
		}
		for i, m := range marks {
			kind, name := text[m[2]:m[3]], text[m[4]:m[5]]
			end := len(text)
			if i+1 < len(marks) {
				end = marks[i+1][0]
			}
			body := strings.TrimSuffix(strings.TrimSpace(text[m[1]:end]), ";")
			if body == "" {
				return nil, fmt.Errorf("%s: %s %s is empty", f, kind, name)
			}
			target := named
			if kind == "fragment" {
				target = frags
			}
			if prev, dup := where[kind+" "+name]; dup {
				return nil, fmt.Errorf("%s: %s %s is also in %s", f, kind, name, prev)
			}
			where[kind+" "+name] = f
			target[name] = body
		}
	}
	out := map[string]string{}
	for kind, set := range map[string]map[string]string{"name": named, "fragment": frags} {
		for name, body := range set {
			sql, err := expand(body, frags, 0)
			if err != nil {
				return nil, fmt.Errorf("%s %s (%s): %w", kind, name, where[kind+" "+name], err)
			}
			out[kind+" "+name] = sql
		}
	}
	return out, nil
}

// expand replaces each {{fragment}} of sql, fragments in fragments included.
func expand(sql string, frags map[string]string, depth int) (string, error) {
	if depth > 4 {
		return "", fmt.Errorf("fragments nest too deep")
	}
	var err error
	out := sqlFragment.ReplaceAllStringFunc(sql, func(ref string) string {
		frag, ok := frags[ref[2:len(ref)-2]]
		if !ok {
			err = fmt.Errorf("no fragment %s", ref)
			return ref
		}
		x, e := expand(frag, frags, depth+1)
		if e != nil {
			err = e
		}
		return x
	})
	return out, err
}

// onlyComments reports whether s (a file's head before its first statement)
// holds nothing but SQL comments.
func onlyComments(s string) bool {
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
			return false
		}
	}
	return true
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
