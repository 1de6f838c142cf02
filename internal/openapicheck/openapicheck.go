// Package openapicheck holds real HTTP responses against an OpenAPI 3.1
// document, for tests: the document must declare what the server sends.
// Wrap a handler under test with Handler and every response to a path the
// document describes is checked as it is sent:
//
//   - the operation (method and path template) is in the document, or the
//     answer is 404 or 405;
//   - its status code is declared (exactly, as a range like 4XX, or default);
//   - a response with a body has a Content-Type the status declares, and one
//     that declares no content sends no body;
//   - every header it sends is declared, except the transport's own
//     (Content-Type, Content-Length, Date, Connection, Transfer-Encoding).
//
// Paths outside the document's top-level segments (the console's HTML pages,
// /healthz, /metrics) are not checked. Bodies are not validated against
// schemas: the tests of each handler assert what a body holds.
package openapicheck

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Doc is an OpenAPI document, read for checking responses.
type Doc struct {
	paths    map[string]map[string]json.RawMessage // path template → method (lower case) → operation
	comps    map[string]map[string]json.RawMessage // components: kind → name → object
	prefixes []string                              // first segments of the paths ("/v1/")
}

// transport are headers net/http or the connection concern, not the API.
var transport = []string{"Content-Type", "Content-Length", "Date", "Connection", "Transfer-Encoding"}

// Parse reads an OpenAPI 3.1 document in JSON.
func Parse(b []byte) (*Doc, error) {
	var raw struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components map[string]map[string]json.RawMessage `json:"components"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("openapicheck: read the document: %w", err)
	}
	d := &Doc{paths: raw.Paths, comps: raw.Components}
	for p := range raw.Paths {
		seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		if pre := "/" + seg + "/"; !slices.Contains(d.prefixes, pre) {
			d.prefixes = append(d.prefixes, pre)
		}
	}
	return d, nil
}

// MustParse is Parse for a document a test embeds; it fails t when the
// document cannot be read.
func MustParse(t testing.TB, b []byte) *Doc {
	t.Helper()
	d, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Response is what a server sent: the parts the document declares.
type Response struct {
	Status int
	Header http.Header
	Body   []byte // at least its first bytes; empty when none was sent
}

// Check returns what the document does not declare about the response to
// method and path (a request's URL path), one sentence per finding; none
// when the path is outside the document.
func (d *Doc) Check(method, path string, res Response) []string {
	if !slices.ContainsFunc(d.prefixes, func(p string) bool { return strings.HasPrefix(path, p) }) {
		return nil
	}
	tmpl, item := d.match(path)
	what := method + " " + path
	if item == nil {
		if res.Status != http.StatusNotFound {
			return []string{fmt.Sprintf("%s: answered %d, but no path of the document matches", what, res.Status)}
		}
		return nil
	}
	what = method + " " + tmpl
	op, ok := item[strings.ToLower(method)]
	if !ok {
		if res.Status != http.StatusNotFound && res.Status != http.StatusMethodNotAllowed {
			return []string{fmt.Sprintf("%s: answered %d, but the document has no such operation", what, res.Status)}
		}
		return nil
	}
	var o struct {
		Responses map[string]json.RawMessage `json:"responses"`
	}
	if err := json.Unmarshal(op, &o); err != nil {
		return []string{fmt.Sprintf("%s: operation unreadable: %v", what, err)}
	}
	code := strconv.Itoa(res.Status)
	raw, ok := o.Responses[code]
	if !ok {
		raw, ok = o.Responses[code[:1]+"XX"]
	}
	if !ok {
		raw, ok = o.Responses["default"]
	}
	if !ok {
		return []string{fmt.Sprintf("%s: status %d is not declared", what, res.Status)}
	}
	var r struct {
		Content map[string]json.RawMessage `json:"content"`
		Headers map[string]json.RawMessage `json:"headers"`
	}
	if err := json.Unmarshal(d.resolve(raw), &r); err != nil {
		return []string{fmt.Sprintf("%s %d: response unreadable: %v", what, res.Status, err)}
	}
	var out []string
	if len(res.Body) > 0 {
		ct := res.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case len(r.Content) == 0:
			out = append(out, fmt.Sprintf("%s %d: sends a body (%s), but declares no content", what, res.Status, ct))
		case err != nil:
			out = append(out, fmt.Sprintf("%s %d: Content-Type %q: %v", what, res.Status, ct, err))
		case r.Content[mt] == nil:
			out = append(out, fmt.Sprintf("%s %d: sends %s, but declares %s", what, res.Status, mt, keys(r.Content)))
		}
	}
	for h := range res.Header {
		if slices.Contains(transport, h) {
			continue
		}
		if !slices.ContainsFunc(keys(r.Headers), func(k string) bool { return strings.EqualFold(k, h) }) {
			out = append(out, fmt.Sprintf("%s %d: sends header %s, which is not declared", what, res.Status, h))
		}
	}
	return out
}

// match finds the path template of path: an exact path first, else one
// whose {parameters} each stand for one segment.
func (d *Doc) match(path string) (string, map[string]json.RawMessage) {
	if item, ok := d.paths[path]; ok {
		return path, item
	}
	segs := strings.Split(path, "/")
	for tmpl, item := range d.paths {
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		ok := true
		for i, t := range ts {
			if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
				ok = segs[i] != ""
			} else {
				ok = t == segs[i]
			}
			if !ok {
				break
			}
		}
		if ok {
			return tmpl, item
		}
	}
	return "", nil
}

// resolve follows a "$ref": "#/components/KIND/NAME".
func (d *Doc) resolve(raw json.RawMessage) json.RawMessage {
	var r struct {
		Ref string `json:"$ref"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Ref == "" {
		return raw
	}
	kind, name, _ := strings.Cut(strings.TrimPrefix(r.Ref, "#/components/"), "/")
	return d.comps[kind][name]
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Handler serves h and checks each of its responses against d: a finding
// fails t (t.Errorf, from the server's goroutine, while the test runs).
func Handler(t testing.TB, d *Doc, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		rec.mu.Lock()
		res := Response{Status: rec.status, Header: rec.header, Body: rec.head}
		rec.mu.Unlock()
		if res.Status == 0 { // nothing written: net/http answers 200, empty
			res.Status, res.Header = http.StatusOK, w.Header().Clone()
		}
		for _, f := range d.Check(r.Method, r.URL.Path, res) {
			t.Errorf("openapi: %s", f)
		}
	})
}

// recorder notes the status, the headers as sent and the first bytes of
// the body, passing everything through.
type recorder struct {
	http.ResponseWriter
	mu     sync.Mutex
	status int
	header http.Header
	head   []byte
}

func (r *recorder) WriteHeader(code int) {
	r.mu.Lock()
	if r.status == 0 && code >= 200 {
		r.status, r.header = code, r.ResponseWriter.Header().Clone()
	}
	r.mu.Unlock()
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	if r.status == 0 {
		// net/http sniffs a missing Content-Type from the first bytes.
		if r.ResponseWriter.Header().Get("Content-Type") == "" {
			r.ResponseWriter.Header().Set("Content-Type", http.DetectContentType(b))
		}
		r.status, r.header = http.StatusOK, r.ResponseWriter.Header().Clone()
	}
	if len(r.head) < 512 {
		r.head = append(r.head, b[:min(len(b), 512-len(r.head))]...)
	}
	r.mu.Unlock()
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (read deadlines,
// flushing).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
