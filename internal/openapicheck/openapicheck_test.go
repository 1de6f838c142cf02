package openapicheck

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

const doc = `{
  "openapi": "3.1.0",
  "paths": {
    "/v1/files/{id}": {
      "get": {"responses": {
        "200": {"content": {"text/csv": {}}, "headers": {"Content-Disposition": {"$ref": "#/components/headers/CD"}}},
        "404": {"$ref": "#/components/responses/NotFound"}
      }}
    },
    "/v1/files": {"post": {"responses": {"204": {}, "4XX": {"content": {"application/problem+json": {}}}}}}
  },
  "components": {
    "headers": {"CD": {}},
    "responses": {"NotFound": {"content": {"application/problem+json": {}}}}
  }
}`

// TestCheck: each rule finds what it is for, and a declared response passes.
func TestCheck(t *testing.T) {
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	h := func(kv ...string) http.Header {
		hd := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	csv := h("Content-Type", "text/csv; charset=utf-8", "Content-Disposition", `attachment; filename="a.csv"`)
	for _, tc := range []struct {
		name, method, path string
		res                Response
		want               string // a finding contains it; "" means none
	}{
		{"declared", "GET", "/v1/files/7", Response{200, csv, []byte("a\n")}, ""},
		{"ref response", "GET", "/v1/files/7", Response{404, h("Content-Type", "application/problem+json"), []byte("{}")}, ""},
		{"range", "POST", "/v1/files", Response{413, h("Content-Type", "application/problem+json"), []byte("{}")}, ""},
		{"no content, no body", "POST", "/v1/files", Response{204, h(), nil}, ""},
		{"outside the document", "GET", "/healthz", Response{200, h("X-Other", "1"), []byte("ok")}, ""},
		{"unknown path under the document, 404", "GET", "/v1/nothing", Response{404, h(), nil}, ""},
		{"wrong method, 405", "DELETE", "/v1/files", Response{405, h("Allow", "POST"), nil}, ""},
		{"undeclared status", "GET", "/v1/files/7", Response{503, h(), nil}, "status 503 is not declared"},
		{"undeclared header", "GET", "/v1/files/7", Response{200, h("Content-Type", "text/csv", "Retry-After", "1"), []byte("a")}, "header Retry-After"},
		{"undeclared content type", "GET", "/v1/files/7", Response{200, h("Content-Type", "application/json"), []byte("{}")}, "sends application/json"},
		{"body where none is declared", "POST", "/v1/files", Response{204, h("Content-Type", "text/plain"), []byte("x")}, "declares no content"},
		{"undocumented operation", "PUT", "/v1/files/7", Response{200, h(), nil}, "no such operation"},
		{"undocumented path", "GET", "/v1/other", Response{200, h(), nil}, "no path of the document"},
	} {
		got := d.Check(tc.method, tc.path, tc.res)
		if tc.want == "" && len(got) > 0 || tc.want != "" && !slices.ContainsFunc(got, func(f string) bool { return strings.Contains(f, tc.want) }) {
			t.Errorf("%s: findings %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestHandlerSeesWhatIsSent: the wrapper checks the status and headers a
// handler really sends, a sniffed Content-Type included.
func TestHandlerSeesWhatIsSent(t *testing.T) {
	d := MustParse(t, []byte(doc))
	var st fakeT
	srv := httptest.NewServer(Handler(&st, d, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.Write([]byte("<html>not csv</html>")) // 200, sniffed text/html
	})))
	res, err := http.Get(srv.URL + "/v1/files/1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	srv.Close() // waits for the handler, and so for its check
	if !slices.ContainsFunc(st.errs, func(s string) bool { return strings.Contains(s, "sends text/html") }) ||
		!slices.ContainsFunc(st.errs, func(s string) bool { return strings.Contains(s, "header Retry-After") }) {
		t.Errorf("findings %q, want text/html and Retry-After", st.errs)
	}
}

// fakeT records what the wrapper reports.
type fakeT struct {
	testing.TB
	errs []string
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}
