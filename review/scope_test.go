package review

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A reviewer scoped to globex probes acme's exceptions and acme's name
// through every door of the review API and console. Nothing it gets back
// names acme, and an acme exception answers exactly as an exception that
// does not exist (a 403 naming the other partner, or a 403 where another id
// gets 404, would tell which ids exist). Every refusal is still audited.
func TestHostileScopedReviewerLearnsNothing(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	const missing = 987654
	type probe struct {
		name           string
		status         int
		body, baseline string // baseline: the same request for an exception that does not exist
	}
	var probes []probe
	api := func(method, path, body string) (int, string) {
		r := call(t, method, ts.URL+path, basic("gina"), body)
		return r.status, r.raw
	}
	for _, p := range []struct{ method, path, body string }{
		{"GET", "/v1/review/exceptions/%d", ""},
		{"POST", "/v1/review/exceptions/%d/approve", `{"note": "x"}`},
		{"POST", "/v1/review/exceptions/%d/reject", ""},
	} {
		st, body := api(p.method, fmt.Sprintf(p.path, f.e1.ID), p.body)
		_, base := api(p.method, fmt.Sprintf(p.path, missing), p.body)
		probes = append(probes, probe{"api " + p.method + " " + p.path, st, body, strings.ReplaceAll(base, fmt.Sprint(missing), fmt.Sprint(f.e1.ID))})
	}
	st, body := api("GET", "/v1/review/exceptions?partner=acme", "")
	probes = append(probes, probe{name: "api list ?partner=acme", status: st, body: body})
	st, body = api("POST", "/v1/review/bulk/approve", `{"partner": "acme"}`)
	probes = append(probes, probe{name: "api bulk acme", status: st, body: body})
	nosuchStatus, nosuch := api("GET", "/v1/review/exceptions?partner=nosuchpartner", "")

	c := newConsole(t, ts.URL)
	if st := c.login("gina", testPassword); st != http.StatusSeeOther {
		t.Fatalf("login: %d", st)
	}
	_, _, queue := c.do("GET", "/review/queue", nil, nil)
	m := csrfRE.FindStringSubmatch(queue)
	if m == nil {
		t.Fatal("no CSRF token on gina's queue page")
	}
	page := func(method, path string, form url.Values) (int, string) {
		st, _, b := c.do(method, path, form, nil)
		return st, b
	}
	for _, p := range []struct {
		method, path string
		form         url.Values
	}{
		{"GET", "/review/exceptions/%d", nil},
		{"GET", "/review/exceptions/%d/file", nil},
		{"POST", "/review/exceptions/%d/decide", url.Values{"action": {"approve"}, "csrf": {m[1]}}},
	} {
		st, body := page(p.method, fmt.Sprintf(p.path, f.e1.ID), p.form)
		_, base := page(p.method, fmt.Sprintf(p.path, missing), p.form)
		probes = append(probes, probe{"console " + p.method + " " + p.path, st, body, strings.ReplaceAll(base, fmt.Sprint(missing), fmt.Sprint(f.e1.ID))})
	}
	for _, path := range []string{"/review/queue?partner=acme", "/review/bulk?partner=acme&action=approve", "/review/dispatch/acme/2024-01"} {
		st, body := page("GET", path, nil)
		probes = append(probes, probe{name: "console " + path, status: st, body: body})
	}

	leaks, sameAsMissing, withBaseline := 0, 0, 0
	for _, p := range probes {
		// The console echoes the filter the reviewer typed in its form; the
		// answer may not say anything else about acme.
		b := strings.ReplaceAll(p.body, `value="acme"`, "")
		if strings.Contains(strings.ToLower(b), "acme") {
			leaks++
			t.Errorf("%s: %d names the other partner: %s", p.name, p.status, p.body)
		}
		if p.status < 400 {
			t.Errorf("%s: %d, want a refusal", p.name, p.status)
		}
		if p.baseline != "" {
			withBaseline++
			if p.status != http.StatusNotFound || p.body != p.baseline {
				t.Errorf("%s: %d %s\ndiffers from an exception that does not exist:\n%s", p.name, p.status, p.body, p.baseline)
			} else {
				sameAsMissing++
			}
		}
	}
	// A partner that exists and one that does not get the same 403.
	if st, body := api("GET", "/v1/review/exceptions?partner=acme", ""); st != nosuchStatus || body != strings.ReplaceAll(nosuch, "nosuchpartner", "acme") {
		t.Errorf("a filter on acme and on a partner that does not exist answer differently:\n%d %s\n%d %s", st, body, nosuchStatus, nosuch)
	}
	if d := f.exception(f.e1.ID); d.Status != "open" {
		t.Fatal("gina decided acme's exception")
	}
	audited := f.count(`SELECT count(*) FROM review_audit WHERE action = 'denied' AND actor = 'gina' AND partner_id = 'acme'`)
	if audited < len(probes) {
		t.Errorf("%d refusals audited with the partner, want at least %d", audited, len(probes))
	}
	t.Logf("SUMMARY scoped-reviewer: %d probes of another partner (API and console): %d answers name it; %d of %d by-id answers byte-identical to a missing exception's 404; %d refusals audited",
		len(probes), leaks, sameAsMissing, withBaseline, audited)
}
