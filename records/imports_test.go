package records_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStoreKnowsNoFileFormat: the store keeps the bytes of files (result
// workbooks, sealed results) without knowing their formats: of this module
// its code imports only normalize (the result lines' layout), migrations
// and internal helpers. A format is built above it (apply gives the
// workbook builder) and handed down as bytes.
func TestStoreKnowsNoFileFormat(t *testing.T) {
	const module = "github.com/payintake/payintake/"
	allowed := func(path string) bool {
		rest, ours := strings.CutPrefix(path, module)
		return !ours || rest == "normalize" || rest == "migrations" || strings.HasPrefix(rest, "internal/")
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); !allowed(path) {
				t.Errorf("%s imports %s: the store keeps bytes; build the file above it and give the store the bytes (or a builder, as NoteResultFormat takes)", name, path)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d files of the package; the test looks in the wrong place", checked)
	}
}
