package sftpd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadsThroughIntake: what intake offers the doors to read a partner's
// submissions (the methods of *Intake in intake/submissions.go: results,
// review reports, envelopes) the SFTP door takes from intake, as the HTTP
// door does, never from the store beside it; so a result is named, sealed
// and streamed by one piece of code whichever door serves it.
func TestReadsThroughIntake(t *testing.T) {
	surface, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "submissions.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	offered := map[string]bool{}
	for _, d := range surface.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.IsExported() {
			offered[fn.Name.Name] = true
		}
	}
	for _, m := range []string{"ResultFiles", "ResultFileNamed", "ReviewReports", "ReviewReport"} {
		if !offered[m] {
			t.Fatalf("intake/submissions.go offers no %s: the test reads the wrong file (it found %v)", m, offered)
		}
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
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if recv, ok := call.X.(*ast.SelectorExpr); ok && recv.Sel.Name == "Store" && offered[call.Sel.Name] {
				t.Errorf("%s calls Store.%s: read it through intake (Intake.%s), as the HTTP door does", name, call.Sel.Name, call.Sel.Name)
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files of the package; the test looks in the wrong place", checked)
	}
}
