package review

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/payintake/payintake/internal/problems"
)

// TestReviewProblemCodes: every code the review API answers with is in the
// one vocabulary of problems (internal/problems), so its type points at a
// page that explains it, as the partner API's do.
func TestReviewProblemCodes(t *testing.T) {
	codeRE := regexp.MustCompile(`writeProblem\(w, r, http\.Status\w+, "([^"]+)"`)
	files, _ := filepath.Glob("*.go")
	used := map[string]string{}
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
	if len(used) < 10 {
		t.Fatalf("only %d codes found: %v", len(used), used)
	}
	for c, f := range used {
		if !problems.Known(c) {
			t.Errorf("code %s (%s) is not in problems.Docs", c, f)
		}
	}

	// A review answer's type is served, as serve mounts both.
	f := newFixture(t)
	ts := serve(t, f)
	r := call(t, "GET", ts.URL+"/v1/review/exceptions/987654", basic("alice"), "")
	wantProblem(t, r, 404, "not_found", "there is no exception 987654")
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", r.body["type"].(string), nil)
	req.SetPathValue("code", strings.TrimPrefix(r.body["type"].(string), problems.Base))
	problems.Handler(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `id="not_found"`) || !strings.Contains(rec.Body.String(), "exceptions do not exist") {
		t.Errorf("the page of %s: %d %s", r.body["type"], rec.Code, rec.Body.String())
	}
}
