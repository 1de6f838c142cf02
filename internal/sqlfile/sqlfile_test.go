package sqlfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
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
			got, err := Load(fsys, frags)
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

func TestSet(t *testing.T) {
	s := MustLoad("pkg", fstest.MapFS{"a.sql": {Data: []byte("-- fragment: f\nx\n-- name: One\nSELECT {{f}};\n")}}, nil)
	if got := s.Query("One"); got != "SELECT x" {
		t.Errorf("Query(One) = %q", got)
	}
	if got := s.Fragment("f"); got != "x" {
		t.Errorf("Fragment(f) = %q", got)
	}
	if got := s.Statements(); len(got) != 1 || got["One"] != "SELECT x" {
		t.Errorf("Statements() = %v, want only One", got)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `pkg: no statement named "Two"`) {
			t.Errorf("Query of an unknown name: panic %v, want one naming it", r)
		}
	}()
	s.Query("Two")
}

func TestUnused(t *testing.T) {
	dir := t.TempDir()
	for f, src := range map[string]string{
		"a.go":      "package a\nvar x = query(\"Taken\")\n",
		"a_test.go": "package a\nvar y = query(\"OnlyInTests\")\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Unused(dir, map[string]string{"Taken": "SELECT 1", "OnlyInTests": "SELECT 2", "Nobody": "SELECT 3"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"Nobody", "OnlyInTests"}; !slices.Equal(got, want) {
		t.Errorf("Unused = %v, want %v", got, want)
	}
}
