package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSpeaksOnlyToIntakeAndAuth: the HTTP door's code imports, of this
// module, only intake (the work and what is read back), partnerauth (whose
// a request is) and internal helpers; never the store (records) or the
// normaliser (normalize), and it does not reach the store through
// intake.Intake's Store field either. Tests may use anything.
func TestSpeaksOnlyToIntakeAndAuth(t *testing.T) {
	const module = "github.com/payintake/payintake/"
	allowed := func(path string) bool {
		rest, ours := strings.CutPrefix(path, module)
		return !ours || rest == "intake" || rest == "partnerauth" || strings.HasPrefix(rest, "internal/")
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
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed(path) {
				t.Errorf("%s imports %s: the HTTP door speaks only to intake and partnerauth; give intake (or partnerauth) the method it needs", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Store" {
				t.Errorf("%s uses .Store: the HTTP door reads the store only through intake's methods", name)
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files of the package; the test looks in the wrong place", checked)
	}
}
