package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/payintake/payintake/internal/problems"
	"github.com/payintake/payintake/normalize"
)

// TestProblemCodesDocumented: every code the API can answer with — the
// literal codes of this package's problems and webhook refusals, and the
// normaliser's row codes a quarantined webhook carries — has its entry in
// the one vocabulary, and each entry is served where the problem type
// points.
func TestProblemCodesDocumented(t *testing.T) {
	documented := map[string]bool{}
	for _, d := range problems.Docs {
		if documented[d.Code] {
			t.Errorf("%s documented twice", d.Code)
		}
		documented[d.Code] = true
	}
	used := map[string]string{}
	codeRE := regexp.MustCompile(`(?:newProblem\(http\.Status\w+, |\b(?:bad|deny|invalid)\(|Code: )"([a-z][a-z_]+)"`)
	files, _ := filepath.Glob("*.go")
	files = append(files, "../webhook.go") // webhook and replay bodies are read by intake
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range codeRE.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = f
		}
	}
	for _, c := range []normalize.Code{normalize.CodeMissingValue, normalize.CodeMangledIdentifier, normalize.CodeInvalidIdentifier,
		normalize.CodeInvalidAmount, normalize.CodeInvalidRate, normalize.CodeInvalidHours, normalize.CodeTooManyDecimals,
		normalize.CodeInvalidCurrency, normalize.CodeCurrencyMismatch, normalize.CodeInvalidDate, normalize.CodeTooManyCells,
		normalize.CodeMalformedRow} {
		used[string(c)] = "normalize"
	}
	if len(used) < 30 {
		t.Fatalf("only %d codes found in the sources: %v", len(used), used)
	}
	for c, where := range used {
		if !documented[c] {
			t.Errorf("code %s (%s) is not in problems.Docs", c, where)
		}
	}

	e := newEnv(t, Config{})
	p := wantProblem(t, e.submit("acme", "", "a.csv", csvRows("E1,2026-03,BASE,1.00,USD")), http.StatusBadRequest, "idempotency_key_missing")
	page := e.get("", p["type"].(string))
	wantStatus(t, page, http.StatusOK)
	if !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") || !strings.Contains(string(page.body), `id="idempotency_key_missing"`) ||
		!strings.Contains(string(page.body), "What to do:") {
		t.Errorf("the problem type %s does not explain the code:\n%s", p["type"], page.body)
	}
	all := e.get("", "/v1/problems")
	for c := range documented {
		if !strings.Contains(string(all.body), `id="`+c+`"`) {
			t.Errorf("/v1/problems lacks %s", c)
		}
	}
	wantProblem(t, e.get("", "/v1/problems/no_such_code"), http.StatusNotFound, "not_found")
}
