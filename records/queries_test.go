package records_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// Every statement of records/*.sql is prepared against the migrated schema:
// a misspelt column, a missing fragment or a statement that no longer
// parses fails here, not on the rare path that runs it.
func TestEveryQueryPrepares(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	stmts := records.Statements()
	if len(stmts) < 100 {
		t.Fatalf("only %d statements loaded from records/*.sql: the loader misses some", len(stmts))
	}
	named := regexp.MustCompile(`@([a-z_]+)`)
	conn, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The temp tables the statements read: the employee import's, and
	// processing's staged and classified rows.
	for _, ddl := range append([]string{stmts["CreateEmployeeImportTable"]}, records.TempTables...) {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	for name, sql := range stmts {
		if strings.Contains(sql, "{{") {
			t.Errorf("%s: a fragment is left unexpanded: %s", name, sql)
			continue
		}
		if m := named.FindAllStringSubmatch(sql, -1); len(m) > 0 {
			// pgx rewrites named arguments (@partner) to $n when it runs them.
			args := pgx.NamedArgs{}
			for _, a := range m {
				args[a[1]] = nil
			}
			sql, _, err = args.RewriteQuery(ctx, tx.Conn(), sql, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if _, err := tx.Exec(ctx, "SAVEPOINT p"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Conn().Prepare(ctx, "", sql); err != nil {
			t.Errorf("statement %s does not prepare: %v\n%s", name, err, sql)
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT p"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d statements prepared", len(stmts))
}

// Every statement of records/*.sql is taken by some Go file (query("X")),
// so none is left behind when its caller goes.
func TestEveryQueryIsUsed(t *testing.T) {
	var src strings.Builder
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for name := range records.Statements() {
		if !strings.Contains(src.String(), `query("`+name+`")`) {
			t.Errorf("statement %s is in records/*.sql but no Go file takes it with query(%q)", name, name)
		}
	}
}

func TestStatementFiles(t *testing.T) {
	frags := map[string]string{"cols": "a, b"}
	for name, tc := range map[string]struct {
		files   map[string]string
		want    map[string]string // key "name X" / "fragment x" → SQL
		wantErr string
	}{
		"one statement, its semicolon dropped": {
			files: map[string]string{"a.sql": "-- name: One\nSELECT 1;\n"},
			want:  map[string]string{"name One": "SELECT 1", "fragment cols": "a, b"},
		},
		"a Go fragment and a file fragment, nested": {
			files: map[string]string{"a.sql": "-- fragment: w\nx = {{cols}}\n\n-- name: Q\nSELECT {{cols}} FROM t WHERE {{w}};\n"},
			want:  map[string]string{"name Q": "SELECT a, b FROM t WHERE x = a, b", "fragment w": "x = a, b", "fragment cols": "a, b"},
		},
		"comments before the first statement": {
			files: map[string]string{"a.sql": "-- what this file holds\n\n-- name: One\nSELECT 1;\n"},
			want:  map[string]string{"name One": "SELECT 1", "fragment cols": "a, b"},
		},
		"SQL before the first name": {
			files:   map[string]string{"a.sql": "SELECT 0;\n-- name: One\nSELECT 1;\n"},
			wantErr: "must follow a '-- name: X' line",
		},
		"a name twice across files": {
			files:   map[string]string{"a.sql": "-- name: One\nSELECT 1;\n", "b.sql": "-- name: One\nSELECT 2;\n"},
			wantErr: "is also in",
		},
		"an unknown fragment": {
			files:   map[string]string{"a.sql": "-- name: One\nSELECT {{nope}};\n"},
			wantErr: "no fragment {{nope}}",
		},
		"an empty statement": {
			files:   map[string]string{"a.sql": "-- name: One\n;\n"},
			wantErr: "is empty",
		},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for f, text := range tc.files {
				fsys[f] = &fstest.MapFile{Data: []byte(text)}
			}
			got, err := records.LoadStatements(fsys, frags)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %d entries %v, want %d %v", len(got), got, len(tc.want), tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
