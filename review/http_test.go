package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/payintake/payintake/internal/openapicheck"
	"github.com/payintake/payintake/internal/problems"
	"github.com/payintake/payintake/records"
)

const testPassword = "correct horse battery staple"

// serve starts the review handler on a test server, with reviewers alice
// (every partner) and gina (globex only).
func serve(t *testing.T, f *fixture) *httptest.Server {
	t.Helper()
	for name, partners := range map[string][]string{"alice": nil, "gina": {"globex"}} {
		h, err := HashPassword(testPassword)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.store.AddReviewer(f.ctx, name, h, partners); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	Mount(mux, f.store, nil)
	// Every API response the tests provoke is held against the API's
	// document, which describes /v1/review/ beside the partners' API.
	doc, err := os.ReadFile("../intake/httpapi/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(openapicheck.Handler(t, openapicheck.MustParse(t, doc), mux))
	t.Cleanup(ts.Close)
	return ts
}

type apiResp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func call(t *testing.T, method, u string, setup func(*http.Request), body string) apiResp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if setup != nil {
		setup(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := apiResp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func basic(name string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(name, testPassword) }
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func wantProblem(t *testing.T, r apiResp, status int, typ, detail string) {
	t.Helper()
	if r.status != status || r.header.Get("Content-Type") != "application/problem+json" ||
		r.body["type"] != "/v1/problems/"+typ || r.body["code"] != typ || !problems.Known(typ) || r.body["status"] != float64(status) ||
		!strings.Contains(fmt.Sprint(r.body["detail"]), detail) || r.body["title"] == "" {
		t.Fatalf("got %d %s %s, want problem %d %s with %q", r.status, r.header.Get("Content-Type"), r.raw, status, typ, detail)
	}
}

func TestAPIAuthentication(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	list := ts.URL + "/v1/review/exceptions"

	r := call(t, "GET", list, nil, "")
	wantProblem(t, r, 401, "unauthenticated", "Authorization: Bearer")
	if len(r.header.Values("WWW-Authenticate")) != 2 {
		t.Fatalf("WWW-Authenticate = %v", r.header.Values("WWW-Authenticate"))
	}
	wantProblem(t, call(t, "GET", list, func(r *http.Request) { r.SetBasicAuth("alice", "wrong") }, ""), 401, "unauthenticated", "wrong reviewer name or password")
	wantProblem(t, call(t, "GET", list, func(r *http.Request) { r.SetBasicAuth("nobody", testPassword) }, ""), 401, "unauthenticated", "wrong")
	wantProblem(t, call(t, "GET", list, bearer("not-a-token"), ""), 401, "unauthenticated", "unknown or expired")
	wantProblem(t, call(t, "POST", ts.URL+"/v1/review/exceptions/1/approve", nil, ""), 401, "unauthenticated", "")
	if d := f.exception(f.e1.ID); d.Status != "open" {
		t.Fatal("unauthenticated approve changed the exception")
	}

	r = call(t, "GET", list, basic("alice"), "")
	if r.status != 200 || len(r.body["exceptions"].([]any)) != 3 {
		t.Fatalf("basic auth list: %d %s", r.status, r.raw)
	}
	tok := call(t, "POST", ts.URL+"/v1/review/token", basic("alice"), "")
	if tok.status != 201 || tok.body["token"] == "" {
		t.Fatalf("token: %d %s", tok.status, tok.raw)
	}
	r = call(t, "GET", list+"?status=open", bearer(tok.body["token"].(string)), "")
	if r.status != 200 || len(r.body["exceptions"].([]any)) != 3 {
		t.Fatalf("bearer list: %d %s", r.status, r.raw)
	}
	wantProblem(t, call(t, "POST", ts.URL+"/v1/review/token", func(r *http.Request) { r.SetBasicAuth("alice", "nope") }, ""), 401, "unauthenticated", "wrong")
	if n := f.count(`SELECT count(*) FROM review_audit WHERE action = 'login_failed'`); n != 3 {
		t.Fatalf("%d failed logins audited, want 3", n)
	}
	// Console cookies are not API credentials.
	wantProblem(t, call(t, "GET", list, func(r *http.Request) { r.AddCookie(&http.Cookie{Name: cookieName, Value: "x"}) }, ""), 401, "unauthenticated", "")
}

func TestAPIListShowPaginate(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	var ids []float64
	next := "/v1/review/exceptions?status=open&limit=2&partner=acme&period=2024-01"
	for next != "" {
		r := call(t, "GET", ts.URL+next, basic("alice"), "")
		if r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.raw)
		}
		for _, x := range r.body["exceptions"].([]any) {
			ids = append(ids, x.(map[string]any)["id"].(float64))
		}
		if c := r.body["counts"].(map[string]any); c["open"] != float64(3) || c["all"] != float64(3) {
			t.Fatalf("counts = %v", c)
		}
		next, _ = r.body["next"].(string)
	}
	if fmt.Sprint(ids) != fmt.Sprint([]float64{float64(f.e1.ID), float64(f.e3.ID), float64(f.e4.ID)}) {
		t.Fatalf("paged ids = %v", ids)
	}
	r := call(t, "GET", ts.URL+"/v1/review/exceptions?status=approved", basic("alice"), "")
	if r.status != 200 || len(r.body["exceptions"].([]any)) != 0 {
		t.Fatalf("approved list: %s", r.raw)
	}
	wantProblem(t, call(t, "GET", ts.URL+"/v1/review/exceptions?status=maybe", basic("alice"), ""), 400, "bad_request", "use open")
	wantProblem(t, call(t, "GET", ts.URL+"/v1/review/exceptions?limit=0", basic("alice"), ""), 400, "bad_request", "limit")
	wantProblem(t, call(t, "GET", ts.URL+"/v1/review/exceptions/99999", basic("alice"), ""), 404, "not_found", "no exception 99999")
	wantProblem(t, call(t, "GET", ts.URL+"/v1/review/nothing", basic("alice"), ""), 404, "not_found", "")

	r = call(t, "GET", fmt.Sprintf("%s/v1/review/exceptions/%d", ts.URL, f.e1.ID), basic("alice"), "")
	if r.status != 200 || r.body["status"] != "open" || r.body["proposed"].(map[string]any)["amount"] != "1100.00" ||
		r.body["current"].(map[string]any)["amount"] != "1000.00" || len(r.body["history"].([]any)) != 1 {
		t.Fatalf("show: %d %s", r.status, r.raw)
	}
}

func TestAPIDecide(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	approve := fmt.Sprintf("%s/v1/review/exceptions/%d/approve", ts.URL, f.e1.ID)
	r := call(t, "POST", approve, basic("alice"), `{"note": "ok per ticket 9"}`)
	if r.status != 200 || r.body["status"] != "approved" || r.body["decided_by"] != "alice" || r.body["note"] != "ok per ticket 9" {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}
	if rec := f.record("E1", "BASE"); rec.Amount != "1100.00" {
		t.Fatalf("record = %+v", rec)
	}
	r = call(t, "POST", fmt.Sprintf("%s/v1/review/exceptions/%d/reject", ts.URL, f.e1.ID), basic("alice"), "")
	wantProblem(t, r, 409, "already_decided", fmt.Sprintf("exception %d was already approved by alice at", f.e1.ID))
	if r.body["decided_by"] != "alice" || r.body["exception_status"] != "approved" {
		t.Fatalf("409 extras: %s", r.raw)
	}
	// Reject without a body.
	r = call(t, "POST", fmt.Sprintf("%s/v1/review/exceptions/%d/reject", ts.URL, f.e3.ID), basic("alice"), "")
	if r.status != 200 || r.body["status"] != "rejected" {
		t.Fatalf("reject: %d %s", r.status, r.raw)
	}
	wantProblem(t, call(t, "POST", fmt.Sprintf("%s/v1/review/exceptions/%d/approve", ts.URL, f.e4.ID), basic("alice"), `{"note": 5`), 400, "bad_request", "not JSON")
	if a := f.count(`SELECT count(*) FROM review_audit WHERE via = 'api' AND action IN ('approve', 'reject')`); a != 2 {
		t.Fatalf("%d api decisions audited, want 2", a)
	}
}

func TestAPICrossPartnerForbidden(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	// gina may review globex only.
	r := call(t, "GET", ts.URL+"/v1/review/exceptions", basic("gina"), "")
	if r.status != 200 || len(r.body["exceptions"].([]any)) != 0 || r.body["counts"].(map[string]any)["all"] != float64(0) {
		t.Fatalf("gina's list shows acme: %s", r.raw)
	}
	wantProblem(t, call(t, "GET", ts.URL+"/v1/review/exceptions?partner=acme", basic("gina"), ""), 403, "forbidden", "you may review only partner(s) globex")
	// Another partner's exception does not exist for gina (TestHostileScopedReviewerLearnsNothing).
	wantProblem(t, call(t, "GET", fmt.Sprintf("%s/v1/review/exceptions/%d", ts.URL, f.e1.ID), basic("gina"), ""), 404, "not_found", fmt.Sprintf("there is no exception %d", f.e1.ID))
	wantProblem(t, call(t, "POST", fmt.Sprintf("%s/v1/review/exceptions/%d/approve", ts.URL, f.e1.ID), basic("gina"), ""), 404, "not_found", fmt.Sprintf("there is no exception %d", f.e1.ID))
	if d := f.exception(f.e1.ID); d.Status != "open" {
		t.Fatal("a cross-partner approve changed the exception")
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE action = 'denied' AND actor = 'gina'`); n != 3 {
		t.Fatalf("%d refusals audited, want 3", n)
	}
	// The store refuses it too, whatever the caller.
	_, err := f.store.Decide(f.ctx, records.Decision{ExceptionID: f.e1.ID, Approve: true, Reviewer: "gina", Partners: []string{"globex"}})
	if err == nil || !strings.Contains(err.Error(), "may not decide exceptions of partner acme") {
		t.Fatalf("store-level scope: %v", err)
	}
}

// console is a browser-like client: cookie jar, no automatic redirects.
type console struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newConsole(t *testing.T, base string) *console {
	jar, _ := cookiejar.New(nil)
	return &console{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (c *console) do(method, path string, form url.Values, hdr map[string]string) (int, http.Header, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, c.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

func (c *console) login(name, password string) int {
	st, _, _ := c.do("POST", "/review/login", url.Values{"name": {name}, "password": {password}, "next": {"/review/queue"}}, nil)
	return st
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestConsoleLoginAndQueue(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	c := newConsole(t, ts.URL)
	st, h, _ := c.do("GET", "/review/queue?status=open", nil, nil)
	if st != 303 || h.Get("Location") != "/review/login?next=%2Freview%2Fqueue%3Fstatus%3Dopen" {
		t.Fatalf("unauthenticated queue: %d %s", st, h.Get("Location"))
	}
	if st := c.login("alice", "wrong"); st != 401 {
		t.Fatalf("wrong password: %d", st)
	}
	st, h, _ = c.do("POST", "/review/login", url.Values{"name": {"alice"}, "password": {testPassword}, "next": {"//evil.example/"}}, nil)
	if st != 303 || h.Get("Location") != "/review/queue" {
		t.Fatalf("login with an off-site next: %d %s", st, h.Get("Location"))
	}
	ck := h.Get("Set-Cookie")
	for _, want := range []string{cookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/review"} {
		if !strings.Contains(ck, want) {
			t.Fatalf("cookie %q lacks %s", ck, want)
		}
	}
	st, _, body := c.do("GET", "/review/queue", nil, nil)
	if st != 200 {
		t.Fatalf("queue: %d", st)
	}
	for _, want := range []string{fmt.Sprintf(`href="/review/exceptions/%d"`, f.e1.ID), "1000.00 USD", "1100.00 USD",
		`data-status="open">open <span class="count">3</span>`, "period closed", "jan-fix.csv:2"} {
		if !strings.Contains(body, want) {
			t.Fatalf("queue lacks %q:\n%s", want, body)
		}
	}
	st, _, body = c.do("GET", fmt.Sprintf("/review/exceptions/%d", f.e1.ID), nil, nil)
	if st != 200 || !strings.Contains(body, `<tr class="differs" data-field="amount">`) ||
		strings.Contains(body, `<tr class="differs" data-field="currency">`) || !strings.Contains(body, "Record history") {
		t.Fatalf("exception page: %d\n%s", st, body)
	}
	if strings.Contains(body, `id="pgp"`) {
		t.Errorf("a plain file's exception page speaks of OpenPGP:\n%s", body)
	}
	// A file that came as OpenPGP: the page says by which keys.
	const platformFP, partnerFP = "0123456789ABCDEF0123456789ABCDEF01234567", "89ABCDEF0123456789ABCDEF0123456789ABCDEF"
	if _, err := f.store.Pool().Exec(f.ctx, `INSERT INTO envelope_pgp (envelope_id, encrypted, signed, decrypted_with, signer, plaintext_sha256, plaintext_size, seal_results)
		VALUES ($1, true, true, $2, $3, '\x00', 1, true)`, f.env2.ID, platformFP, partnerFP); err != nil {
		t.Fatal(err)
	}
	_, _, body = c.do("GET", fmt.Sprintf("/review/exceptions/%d", f.e1.ID), nil, nil)
	if !strings.Contains(body, "encrypted to platform key <code>"+platformFP) || !strings.Contains(body, "signed by partner key <code>"+partnerFP) {
		t.Errorf("the exception page of an OpenPGP file does not name its keys:\n%s", body)
	}
	// Filters and a scoped reviewer.
	st, _, body = c.do("GET", "/review/queue?status=all&partner=globex", nil, nil)
	if st != 200 || !strings.Contains(body, "No exceptions match these filters") {
		t.Fatalf("filtered queue: %d", st)
	}
	g := newConsole(t, ts.URL)
	if st := g.login("gina", testPassword); st != 303 {
		t.Fatalf("gina login: %d", st)
	}
	if st, _, _ := g.do("GET", fmt.Sprintf("/review/exceptions/%d", f.e1.ID), nil, nil); st != 404 {
		t.Fatalf("gina opening an acme exception: %d, want 404 (it does not exist for her)", st)
	}
	if st, _, _ := g.do("GET", "/review/queue?partner=acme", nil, nil); st != 403 {
		t.Fatalf("gina filtering on acme: %d", st)
	}
	// Logout ends the session.
	_, _, body = c.do("GET", "/review/queue", nil, nil)
	tok := csrfRE.FindStringSubmatch(body)[1]
	if st, _, _ := c.do("POST", "/review/logout", url.Values{"csrf": {tok}}, nil); st != 303 {
		t.Fatalf("logout: %d", st)
	}
	if st, _, _ := c.do("GET", "/review/queue", nil, nil); st != 303 {
		t.Fatalf("queue after logout: %d", st)
	}
}

func TestConsoleDecideAndCSRF(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	c := newConsole(t, ts.URL)
	if st := c.login("alice", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}
	page := fmt.Sprintf("/review/exceptions/%d", f.e1.ID)
	_, _, body := c.do("GET", page, nil, nil)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the exception page")
	}
	tok := m[1]
	decide := page + "/decide"

	// No token, a wrong token, a cross-site browser request: all refused.
	if st, _, _ := c.do("POST", decide, url.Values{"action": {"approve"}}, nil); st != 403 {
		t.Fatalf("POST without CSRF token: %d", st)
	}
	if st, _, _ := c.do("POST", decide, url.Values{"action": {"approve"}, "csrf": {tok + "x"}}, nil); st != 403 {
		t.Fatalf("POST with a wrong CSRF token: %d", st)
	}
	if st, _, _ := c.do("POST", decide, url.Values{"action": {"approve"}, "csrf": {tok}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); st != 403 {
		t.Fatalf("cross-site POST: %d", st)
	}
	if st, _, _ := c.do("POST", decide, url.Values{"action": {"approve"}, "csrf": {tok}}, map[string]string{"Origin": "https://evil.example"}); st != 403 {
		t.Fatalf("cross-origin POST: %d", st)
	}
	// Another session's token does not work either.
	other := newConsole(t, ts.URL)
	other.login("alice", testPassword)
	_, _, ob := other.do("GET", page, nil, nil)
	if st, _, _ := c.do("POST", decide, url.Values{"action": {"approve"}, "csrf": {csrfRE.FindStringSubmatch(ob)[1]}}, nil); st != 403 {
		t.Fatalf("POST with another session's token: %d", st)
	}
	// Without a session at all.
	anon := newConsole(t, ts.URL)
	if st, _, _ := anon.do("POST", decide, url.Values{"action": {"approve"}, "csrf": {tok}}, nil); st != 401 {
		t.Fatalf("POST without a session: %d", st)
	}
	if d := f.exception(f.e1.ID); d.Status != "open" {
		t.Fatalf("a refused POST decided the exception: %+v", d)
	}

	st, h, _ := c.do("POST", decide, url.Values{"action": {"approve"}, "csrf": {tok}, "note": {"checked"}},
		map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": ts.URL})
	if st != 303 || h.Get("Location") != page+"?decided=1" {
		t.Fatalf("approve: %d %s", st, h.Get("Location"))
	}
	if d := f.exception(f.e1.ID); d.Status != "approved" || d.DecidedBy != "alice" || d.Note != "checked" {
		t.Fatalf("after approve: %+v", d)
	}
	_, _, body = c.do("GET", page+"?decided=1", nil, nil)
	if !strings.Contains(body, fmt.Sprintf("You approved exception %d.", f.e1.ID)) || !strings.Contains(body, "approved by alice") {
		t.Fatalf("page after approve:\n%s", body)
	}
	// The other session loses, and is told who won.
	st, _, ob = other.do("POST", decide, url.Values{"action": {"reject"}, "csrf": {csrfRE.FindStringSubmatch(ob)[1]}}, nil)
	if st != 409 || !strings.Contains(ob, fmt.Sprintf("exception %d was already approved by alice at", f.e1.ID)) {
		t.Fatalf("second decision: %d\n%s", st, ob)
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE action = 'denied' AND via = 'console'`); n != 3 {
		t.Fatalf("%d CSRF refusals audited, want 3", n)
	}
}

// From an exception's page the reviewer downloads the file its row came
// from, byte for byte as the partner sent it, under its name; a chunk of it
// lost in storage fails the download instead of giving a shorter file.
func TestConsoleReceivedFile(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	c := newConsole(t, ts.URL)
	if st := c.login("alice", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}
	page := fmt.Sprintf("/review/exceptions/%d", f.e1.ID)
	_, _, body := c.do("GET", page, nil, nil)
	link := fmt.Sprintf(`href="%s/file"`, page)
	if !strings.Contains(body, link) {
		t.Fatalf("the exception page has no link %s", link)
	}
	sent, err := os.ReadFile(filepath.Join(f.dir, "jan-fix.csv"))
	if err != nil {
		t.Fatal(err)
	}
	st, h, got := c.do("GET", page+"/file", nil, nil)
	if st != 200 || got != string(sent) {
		t.Fatalf("GET %s/file: %d, %q; want 200 and the %d bytes of jan-fix.csv", page, st, got, len(sent))
	}
	if cd := h.Get("Content-Disposition"); cd != `attachment; filename=jan-fix.csv` {
		t.Errorf("Content-Disposition %q, want an attachment named jan-fix.csv", cd)
	}
	if ct, n := h.Get("Content-Type"), h.Get("X-Content-Type-Options"); ct != "application/octet-stream" || n != "nosniff" {
		t.Errorf("Content-Type %q, X-Content-Type-Options %q: a browser must not render the partner's bytes", ct, n)
	}
	if st, _, _ := newConsole(t, ts.URL).do("GET", page+"/file", nil, nil); st != 401 && st != 303 {
		t.Errorf("without a session: %d, want a refusal", st)
	}

	// A lost chunk: the connection ends before the declared length.
	if _, err := f.store.Pool().Exec(f.ctx, `DELETE FROM envelope_chunks WHERE envelope_id = $1`, f.e1.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", ts.URL+page+"/file", nil)
	res, err := c.c.Do(req)
	if err == nil {
		b, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		if rerr == nil {
			t.Fatalf("a file whose bytes are lost downloaded whole: %d, %q", res.StatusCode, b)
		}
	}
}

func TestAPIBulk(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	bulk := ts.URL + "/v1/review/bulk/"
	r := call(t, "POST", bulk+"approve", basic("alice"), `{"partner": "acme", "min_change": "100", "dry_run": true}`)
	if r.status != 200 || r.body["matched"] != float64(2) || r.body["decided"] != float64(0) || r.body["dry_run"] != true ||
		fmt.Sprint(r.body["total_change"]) != "[map[amount:600.00 currency:USD]]" {
		t.Fatalf("dry run: %d %s", r.status, r.raw)
	}
	if n := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open'`); n != 3 {
		t.Fatalf("the dry run decided: %d open", n)
	}
	r = call(t, "POST", bulk+"approve", basic("alice"), `{"partner": "acme", "min_change": "100", "note": "ticket 7"}`)
	if r.status != 200 || r.body["decided"] != float64(2) || r.body["status"] != "approved" || len(r.body["refused"].([]any)) != 0 {
		t.Fatalf("bulk approve: %d %s", r.status, r.raw)
	}
	if a := f.count(`SELECT count(*) FROM review_audit WHERE via = 'api' AND action = 'approve' AND detail = 'ticket 7'`); a != 2 {
		t.Fatalf("%d audit rows, want 2", a)
	}
	wantProblem(t, call(t, "POST", bulk+"reject", basic("alice"), `{"period": "2024-01"}`), 400, "bad_request", "one partner")
	wantProblem(t, call(t, "POST", bulk+"reject", basic("alice"), `{"partner": "acme", "employe": "E3"}`), 422, "unknown_member", `"employe" is not one this body takes`)
	wantProblem(t, call(t, "POST", bulk+"reject", basic("alice"), `{"partner": "acme", "code": "nope"}`), 400, "bad_request", "code")
	wantProblem(t, call(t, "POST", bulk+"reject", basic("gina"), `{"partner": "acme"}`), 403, "forbidden", "you may review only partner(s) globex")
	r = call(t, "POST", bulk+"reject", basic("alice"), `{"partner": "acme"}`)
	if r.status != 200 || r.body["decided"] != float64(1) || r.body["status"] != "rejected" {
		t.Fatalf("bulk reject: %d %s", r.status, r.raw)
	}
}

func TestConsoleBulkConfirmsTheSetItShowed(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	c := newConsole(t, ts.URL)
	if st := c.login("alice", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}
	st, _, body := c.do("GET", "/review/bulk?action=reject&partner=acme&code=record_locked", nil, nil)
	if st != 200 || !strings.Contains(body, `<dd id="count"><b>2</b> open</dd>`) || !strings.Contains(body, "&#43;125.00 USD") {
		t.Fatalf("confirm page: %d\n%s", st, body)
	}
	tok := csrfRE.FindStringSubmatch(body)[1]
	form := url.Values{"csrf": {tok}, "action": {"reject"}, "partner": {"acme"}, "code": {"record_locked"}, "expect": {"2"}, "note": {"no"}}
	// Meanwhile another reviewer decides one of them: the confirmed count no longer holds.
	if _, err := f.decide(f.e1.ID, false, "bob", ""); err != nil {
		t.Fatal(err)
	}
	st, _, body = c.do("POST", "/review/bulk", form, nil)
	if st != 409 || !strings.Contains(body, "changed since you opened this page (2 then, 1 now)") {
		t.Fatalf("stale confirm: %d\n%s", st, body)
	}
	if n := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open'`); n != 2 {
		t.Fatalf("a stale confirm decided something: %d open", n)
	}
	form.Set("expect", "1")
	form.Del("csrf")
	if st, _, _ := c.do("POST", "/review/bulk", form, nil); st != 403 {
		t.Fatalf("bulk without CSRF: %d", st)
	}
	form.Set("csrf", tok)
	st, _, body = c.do("POST", "/review/bulk", form, nil)
	if st != 200 || !strings.Contains(body, "You rejected 1 exception(s) of partner acme.") {
		t.Fatalf("bulk reject: %d\n%s", st, body)
	}
	if d := f.exception(f.e3.ID); d.Status != "rejected" || d.Note != "no" || d.DecidedBy != "alice" {
		t.Fatalf("e3 = %+v", d)
	}
	if st, _, _ := c.do("GET", "/review/bulk?action=approve", nil, nil); st != 400 {
		t.Fatalf("bulk without a partner: %d", st)
	}
	g := newConsole(t, ts.URL)
	g.login("gina", testPassword)
	if st, _, _ := g.do("GET", "/review/bulk?action=approve&partner=acme", nil, nil); st != 403 {
		t.Fatalf("gina bulk on acme: %d", st)
	}
}

func TestDisabledReviewerStopsAtOnce(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	tok := call(t, "POST", ts.URL+"/v1/review/token", basic("alice"), "").body["token"].(string)
	c := newConsole(t, ts.URL)
	if st := c.login("alice", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}
	list := ts.URL + "/v1/review/exceptions"
	if r := call(t, "GET", list, bearer(tok), ""); r.status != 200 {
		t.Fatalf("token before disable: %d", r.status)
	}
	if changed, err := f.store.SetReviewerDisabled(f.ctx, "alice", true); err != nil || !changed {
		t.Fatalf("disable: %v %v", changed, err)
	}
	wantProblem(t, call(t, "GET", list, bearer(tok), ""), 401, "unauthenticated", "unknown or expired")
	wantProblem(t, call(t, "GET", list, basic("alice"), ""), 401, "unauthenticated", "wrong reviewer name or password")
	if st, h, _ := c.do("GET", "/review/queue", nil, nil); st != 303 || !strings.HasPrefix(h.Get("Location"), "/review/login") {
		t.Fatalf("console session after disable: %d %s", st, h.Get("Location"))
	}
	if st := c.login("alice", testPassword); st != 401 {
		t.Fatalf("console login while disabled: %d", st)
	}
	if changed, err := f.store.SetReviewerDisabled(f.ctx, "alice", true); err != nil || changed {
		t.Fatalf("disable twice: %v %v", changed, err)
	}
	if changed, err := f.store.SetReviewerDisabled(f.ctx, "alice", false); err != nil || !changed {
		t.Fatalf("enable: %v %v", changed, err)
	}
	if st := c.login("alice", testPassword); st != 303 {
		t.Fatalf("login after enable: %d", st)
	}
	if r := call(t, "GET", list, basic("alice"), ""); r.status != 200 {
		t.Fatalf("basic after enable: %d", r.status)
	}
	if _, err := f.store.SetReviewerDisabled(f.ctx, "nobody", true); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("disable an unknown reviewer: %v", err)
	}
}
