package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOpenAPIDeclaresWhatIsSent: the document lists exactly the routes the
// server registers, and declares on every response what the server sends
// besides the body: X-Request-Id (the middleware, always), WWW-Authenticate
// on 401, Retry-After on 409, and 405 with Allow for every path. The
// reviewers' API (/v1/review/) is in the same document but served by the
// review package, whose tests hold its responses against it. What each
// response really sends is checked too: newEnv's server holds every response
// of every test against the document (internal/openapicheck).
func TestOpenAPIDeclaresWhatIsSent(t *testing.T) {
	type response struct {
		Ref     string                     `json:"$ref"`
		Headers map[string]json.RawMessage `json:"headers"`
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Responses map[string]response `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, rt := range routes {
		registered[strings.ToLower(rt.method)+" "+rt.path] = true
		if _, ok := doc.Paths[rt.path][strings.ToLower(rt.method)]; !ok {
			t.Errorf("%s %s is served but not in openapi.json", rt.method, rt.path)
		}
	}
	for path, item := range doc.Paths {
		if strings.HasPrefix(path, reviewPaths) {
			continue
		}
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			if !registered[method+" "+path] {
				t.Errorf("%s %s is in openapi.json but not served", method, path)
			}
			var op struct {
				Responses map[string]response `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			if r := op.Responses["405"]; r.Ref == "" || doc.Components.Responses["MethodNotAllowed"].Headers["Allow"] == nil {
				t.Errorf("%s %s: no 405 with Allow", method, path)
			}
			for code, r := range op.Responses {
				if r.Ref != "" {
					r = doc.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")]
				}
				want := []string{"X-Request-Id"}
				switch code {
				case "401":
					want = append(want, "WWW-Authenticate")
				case "409":
					want = append(want, "Retry-After")
				}
				for _, h := range want {
					if r.Headers[h] == nil {
						t.Errorf("%s %s %s: header %s not declared", method, path, code, h)
					}
				}
			}
		}
	}
}

// reviewPaths are the document's paths of the review package's API.
const reviewPaths = "/v1/review/"
