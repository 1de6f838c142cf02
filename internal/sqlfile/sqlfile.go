// Package sqlfile loads a package's SQL from the .sql files kept beside its
// Go files and embedded in the binary, so a statement is read as SQL (by a
// person, an editor, a linter) and checked against the schema by a test,
// instead of hiding in Go string literals. Each file holds named statements
// in the layout sqlc and riverqueue/river use:
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
// A statement names a fragment as {{queue_where}}; fragments may also come
// from Go (a row type's column list kept beside its scan function, so the
// columns a statement reads and the order they are scanned in are written in
// one place). Comments before a file's first statement describe the file.
//
// A package loads its files once, at initialisation (MustLoad), and takes
// each statement with a one-line query("Name") of its own calling
// Set.Query: a name that is not in any .sql file stops the program (and
// every test) at start, never at the call. Its tests prepare every
// statement against the migrated schema (Prepare) and check that each is
// taken by some Go file (Unused).
package sqlfile

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Set is the named statements and fragments of one package's .sql files,
// fragments expanded. It is written once, when loaded, and only read.
type Set struct {
	pkg string
	m   map[string]string // key "name X" or "fragment x"
}

// MustLoad loads every .sql file of fsys (Load) for package pkg (named in
// panics); a malformed file panics, at initialisation.
func MustLoad(pkg string, fsys fs.FS, fragments map[string]string) *Set {
	m, err := Load(fsys, fragments)
	if err != nil {
		panic(pkg + ": " + err.Error())
	}
	return &Set{pkg: pkg, m: m}
}

// Query returns the named statement; an unknown name panics (at package
// initialisation, where every caller asks).
func (s *Set) Query(name string) string {
	sql, ok := s.m["name "+name]
	if !ok {
		panic(fmt.Sprintf("%s: no statement named %q in %s/*.sql", s.pkg, name, s.pkg))
	}
	return sql
}

// Fragment returns a fragment, expanded, for SQL still composed in Go; an
// unknown name panics.
func (s *Set) Fragment(name string) string {
	sql, ok := s.m["fragment "+name]
	if !ok {
		panic(fmt.Sprintf("%s: no fragment named %q in %s/*.sql", s.pkg, name, s.pkg))
	}
	return sql
}

// Statements returns every named statement by name, for the tests that
// check them (Prepare, Unused).
func (s *Set) Statements() map[string]string {
	out := map[string]string{}
	for k, v := range s.m {
		if name, ok := strings.CutPrefix(k, "name "); ok {
			out[name] = v
		}
	}
	return out
}

var (
	marker      = regexp.MustCompile(`(?m)^-- (name|fragment): *([A-Za-z_][A-Za-z0-9_]*) *$`)
	fragmentRef = regexp.MustCompile(`\{\{([a-z_]+)\}\}`)
)

// Load parses every .sql file of fsys into its named statements (key
// "name X") and fragments (key "fragment x"), with fragments (fragments
// given plus those of the files) expanded in both. A statement's trailing
// semicolon is dropped. A file with SQL before its first name, an empty
// statement, a name given twice or an unknown fragment is an error.
func Load(fsys fs.FS, fragments map[string]string) (map[string]string, error) {
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
		marks := marker.FindAllStringSubmatchIndex(text, -1)
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
	out := fragmentRef.ReplaceAllStringFunc(sql, func(ref string) string {
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

var namedArg = regexp.MustCompile(`@([a-z_]+)`)

// Prepare prepares every statement of stmts (name → SQL) in tx, each under
// a savepoint so one failure does not hide the next, and returns an error
// for each that does not prepare: a misspelt column, a fragment left
// unexpanded, a statement that no longer parses. It is for tests, run
// against the migrated schema (and whatever temporary tables the caller
// created in tx), so such a statement fails there rather than on the rare
// path that runs it.
func Prepare(ctx context.Context, tx pgx.Tx, stmts map[string]string) []error {
	var errs []error
	for name, sql := range stmts {
		if strings.Contains(sql, "{{") {
			errs = append(errs, fmt.Errorf("statement %s: a fragment is left unexpanded: %s", name, sql))
			continue
		}
		if m := namedArg.FindAllStringSubmatch(sql, -1); len(m) > 0 {
			// pgx rewrites named arguments (@partner) to $n when it runs them.
			args := pgx.NamedArgs{}
			for _, a := range m {
				args[a[1]] = nil
			}
			var err error
			if sql, _, err = args.RewriteQuery(ctx, tx.Conn(), sql, nil); err != nil {
				errs = append(errs, fmt.Errorf("statement %s: %w", name, err))
				continue
			}
		}
		if _, err := tx.Exec(ctx, "SAVEPOINT sqlfile_prepare"); err != nil {
			return append(errs, err)
		}
		if _, err := tx.Conn().Prepare(ctx, "", sql); err != nil {
			errs = append(errs, fmt.Errorf("statement %s does not prepare: %w\n%s", name, err, sql))
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT sqlfile_prepare"); err != nil {
			return append(errs, err)
		}
	}
	return errs
}

// Unused returns the statements of stmts that no Go file of dir (tests
// aside) takes with query("Name"), so none is left behind when its caller
// goes. It is for tests, run in the package's own directory.
func Unused(dir string, stmts map[string]string) ([]string, error) {
	var src strings.Builder
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		src.Write(b)
	}
	var unused []string
	for name := range stmts {
		if !strings.Contains(src.String(), `query("`+name+`")`) {
			unused = append(unused, name)
		}
	}
	return unused, nil
}

// Check is what a package's TestEveryQueryPrepares asks: every statement of
// stmts prepares in tx (Prepare) and is taken by a Go file of dir (Unused).
func Check(ctx context.Context, tx pgx.Tx, dir string, stmts map[string]string) []error {
	errs := Prepare(ctx, tx, stmts)
	unused, err := Unused(dir, stmts)
	if err != nil {
		return append(errs, err)
	}
	for _, name := range unused {
		errs = append(errs, fmt.Errorf("statement %s is in a .sql file of %s but no Go file takes it with query(%q)", name, dir, name))
	}
	return errs
}

// CheckDB is Check in a transaction of its own on db (a pool), rolled back,
// for a package whose statements need no temporary tables.
func CheckDB(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, dir string, stmts map[string]string) []error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return []error{err}
	}
	defer tx.Rollback(ctx)
	return Check(ctx, tx, dir, stmts)
}
