package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeMapsEveryPackageAndDependency keeps the README's package map
// and dependency table, and CONTRIBUTING's layout, true: every package of
// the module (a folder with a non-test Go file) is named in both, and
// every direct requirement of go.mod is named in the README with why it is
// there. A new package or dependency without its line fails here.
func TestReadmeMapsEveryPackageAndDependency(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, contributing := repoFile(t, "README.md"), repoFile(t, "CONTRIBUTING.md")
	section := func(doc, heading string) string {
		t.Helper()
		i := strings.Index(doc, "\n## "+heading)
		if i < 0 {
			t.Fatalf("README.md has no section %q", heading)
		}
		rest := doc[i+1:]
		if j := strings.Index(rest[1:], "\n## "); j >= 0 {
			rest = rest[:j+1]
		}
		return rest
	}
	packages, deps := section(readme, "Packages"), section(readme, "Dependencies")

	var pkgs []string
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if p := filepath.ToSlash(rel); !seen[p] {
				seen[p] = true
				pkgs = append(pkgs, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 15 {
		t.Fatalf("only %d packages found (%v): the walk no longer finds the module's packages", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		if !strings.Contains(packages, "| `"+p+"` |") {
			t.Errorf("README.md's package map has no line for %s", p)
		}
		if !strings.Contains(contributing, "`"+p+"`") && !strings.Contains(contributing, "`"+p+"/`") {
			t.Errorf("CONTRIBUTING.md's layout does not name %s", p)
		}
	}

	var direct []string
	sc := bufio.NewScanner(strings.NewReader(repoFile(t, "go.mod")))
	inRequire := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			inRequire = true
		case line == ")":
			inRequire = false
		case inRequire && !strings.Contains(line, "// indirect"):
			if f := strings.Fields(line); len(f) >= 2 {
				direct = append(direct, f[0])
			}
		}
	}
	if len(direct) < 10 {
		t.Fatalf("only %d direct requirements read from go.mod (%v): the test no longer reads it right", len(direct), direct)
	}
	for _, m := range direct {
		if !strings.Contains(deps, "`"+m+"`") {
			t.Errorf("README.md's dependency table does not say why %s is there", m)
		}
	}
	t.Logf("%d packages and %d direct dependencies, each in the README", len(pkgs), len(direct))
}

// repoFile is the text of a file of the repository, by its path from the
// repository's root.
func repoFile(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
