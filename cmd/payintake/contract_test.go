package main

import (
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestContractNamesEveryResultCode reads the code that writes result files
// and keeps docs/contract.md telling partners about every code they can
// find there: every normalize.Code (the normaliser's row and file codes and
// the store's, which the classification statement writes through sqlCode),
// and every file-level rejection.
func TestContractNamesEveryResultCode(t *testing.T) {
	root := filepath.Join("..", "..")
	read := func(rel string) string { t.Helper(); return repoFile(t, rel) }
	codes := map[string]string{} // code → where it comes from
	add := func(where string, re *regexp.Regexp, src string) {
		t.Helper()
		ms := re.FindAllStringSubmatch(src, -1)
		if len(ms) == 0 {
			t.Fatalf("no codes found in %s with %s: the test no longer matches the code", where, re)
		}
		for _, m := range ms {
			codes[m[1]] = where
		}
	}
	add("normalize/normalize.go", regexp.MustCompile(`(?m)^\s+Code\w+\s+Code\s+= "(\w+)"`), read("normalize/normalize.go"))
	classify := read("apply/classify.go")
	i, j := strings.Index(classify, "END AS outcome,"), strings.Index(classify, "END AS out_code,")
	if i < 0 || j < i {
		t.Fatal("apply/classify.go: no out_code CASE found")
	}
	// The classification statement writes the codes normalize names
	// (sqlCode), never a word of its own, which the normalize scan missed.
	if lit := regexp.MustCompile(`THEN '(\w+)'`).FindAllString(classify[i:j], -1); len(lit) > 0 {
		t.Errorf("apply/classify.go writes codes as SQL literals %q: name them in normalize and write them with sqlCode", lit)
	}
	if !strings.Contains(classify[i:j], "sqlCode(normalize.Code") {
		t.Fatal("apply/classify.go: the out_code CASE writes no normalize code: the test no longer matches the code")
	}
	fileRejects := regexp.MustCompile(`ParseError\{Err: normalize\.Code\("(\w+)"\)|reject\("(\w+)"`)
	for _, rel := range []string{"apply/apply.go", "apply/engine.go", "apply/replay.go", "records/envelopes.go", "records/replay.go", "intake/intake.go", "intake/replay.go"} {
		for _, m := range fileRejects.FindAllStringSubmatch(read(rel), -1) {
			codes[m[1]+m[2]] = rel
		}
	}
	contract := read("docs/contract.md")
	var missing []string
	for c, where := range codes {
		if !strings.Contains(contract, "`"+c+"`") {
			missing = append(missing, c+" ("+where+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("docs/contract.md does not tell partners about %d code(s) their results can carry: %s", len(missing), strings.Join(missing, ", "))
	}
	if len(codes) < 30 {
		t.Fatalf("only %d codes found: the test no longer reads the code right: %v", len(codes), codes)
	}
	t.Logf("%d result codes, each in docs/contract.md", len(codes))
	// The docs stand alone: a user's clone has no ../shared.
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) < 2 {
		t.Fatalf("docs/*.md: %v %v", docs, err)
	}
	pages := []string{"README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "RELIABILITY.md", "sample-files/README.md"}
	for _, d := range docs {
		pages = append(pages, filepath.Join("docs", filepath.Base(d)))
	}
	for _, bad := range []string{"../shared", "SPEC.md"} {
		for _, rel := range pages {
			if strings.Contains(read(rel), bad) {
				t.Errorf("%s points at %s, which users do not have", rel, bad)
			}
		}
	}
}
