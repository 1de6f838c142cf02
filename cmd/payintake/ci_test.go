package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// CI runs every test: `go test -short` skips the load tests, and .ci/run
// must never pass it.
func TestCIRunsLoadTests(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	runs := regexp.MustCompile(`(?m)^\s*go test\b.*$`).FindAllString(string(b), -1)
	if len(runs) == 0 {
		t.Fatal(".ci/run runs no go test")
	}
	for _, r := range runs {
		if regexp.MustCompile(`\s-(test\.)?short\b`).MatchString(r) {
			t.Errorf(".ci/run skips the load tests: %q", r)
		}
	}
}
