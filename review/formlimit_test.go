package review

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestConsoleFormOverItsLimit: a console form over its limit is answered
// 413 with what to do, whether the client declared its length or sent it
// chunked (as a browser or a script streaming a file may); it is never
// mistaken for a form without its CSRF token, and nothing in it is done. A
// form without the token is still refused as such.
func TestConsoleFormOverItsLimit(t *testing.T) {
	f := newFixture(t)
	inner := serve(t, f)
	// How each request's body came, as the server saw it: the test must
	// send chunked what it means to.
	var mu sync.Mutex
	var came []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		how := fmt.Sprintf("length %d", r.ContentLength)
		if r.ContentLength < 0 && len(r.TransferEncoding) == 1 && r.TransferEncoding[0] == "chunked" {
			how = "chunked"
		}
		mu.Lock()
		came = append(came, r.Method+" "+r.URL.Path+" "+how)
		mu.Unlock()
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	lastCame := func() string {
		mu.Lock()
		defer mu.Unlock()
		return came[len(came)-1]
	}
	// chunked hides a body's length from Go's client, which then sends it
	// chunked.
	chunked := func(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b)) }

	c := newConsole(t, ts.URL)
	if st := c.login("alice", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}
	_, _, form := c.do("GET", "/review/preview", nil, nil)
	tok := csrfRE.FindStringSubmatch(form)[1]

	const head = header
	big := head + strings.Repeat("E1,2024-01,BASE,1000.00,USD\n", sampleMax/28+1)
	ctype, body := sampleForm("acme", "big.csv", big, tok)
	const sampleWant = "The sample is larger than the 1024 KiB a preview reads. Send a smaller sample (its first rows are enough to check the columns and codes), " +
		"or check the whole file on the command line: payintake partner profile check PARTNER FILE."
	for _, how := range []string{"chunked", "length"} {
		var r io.Reader = bytes.NewReader(body)
		if how == "chunked" {
			r = chunked(body)
		}
		st, page := c.post("/review/preview", ctype, r)
		if got := lastCame(); !strings.HasPrefix(got, "POST /review/preview "+how) {
			t.Fatalf("the sample came as %q, want %s", got, how)
		}
		if st != 413 || !strings.Contains(html.UnescapeString(page), sampleWant) {
			t.Errorf("a sample over the limit, %s: %d\n%s", how, st, page)
		}
	}
	// A sample under the limit, chunked, is read and previewed.
	ctype, body = sampleForm("acme", "small.csv", head+"E1,2024-01,BASE,1000.00,USD\n", tok)
	if st, page := c.post("/review/preview", ctype, chunked(body)); st != 200 || !strings.Contains(page, `id="counts">unchanged 1<`) {
		t.Errorf("a small sample, chunked: %d\n%s", st, page)
	}

	// A decision whose note is over the form's limit: 413, not decided.
	decide := fmt.Sprintf("/review/exceptions/%d/decide", f.e1.ID)
	long := url.Values{"action": {"approve"}, "csrf": {tok}, "note": {strings.Repeat("n", formMax)}}.Encode()
	for _, how := range []string{"chunked", "length"} {
		var r io.Reader = strings.NewReader(long)
		if how == "chunked" {
			r = chunked([]byte(long))
		}
		st, page := c.post(decide, "application/x-www-form-urlencoded", r)
		if got := lastCame(); !strings.HasPrefix(got, "POST "+decide+" "+how) {
			t.Fatalf("the decision came as %q, want %s", got, how)
		}
		if st != 413 || !strings.Contains(page, "The form is larger than the 64 KiB the console reads: shorten the note and send it again.") {
			t.Errorf("a note over the limit, %s: %d\n%s", how, st, page)
		}
	}
	// An ordinary form without its token is still a CSRF refusal.
	if st, page := c.post(decide, "application/x-www-form-urlencoded", strings.NewReader("action=approve")); st != 403 || !strings.Contains(page, "CSRF check failed") {
		t.Errorf("a decision without a CSRF token: %d\n%s", st, page)
	}
	if d := f.exception(f.e1.ID); d.Status != "open" {
		t.Fatalf("a refused form decided the exception: %+v", d)
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE action = 'denied' AND via = 'console'`); n != 1 {
		t.Errorf("%d CSRF refusals audited, want 1 (the form without a token)", n)
	}

	// A login form over its limit, chunked.
	login := url.Values{"name": {"alice"}, "password": {strings.Repeat("p", loginMax)}}.Encode()
	if st, page := newConsole(t, ts.URL).post("/review/login", "application/x-www-form-urlencoded", chunked([]byte(login))); st != 413 ||
		!strings.Contains(page, "The login form is larger than the 16 KiB a name and password need") {
		t.Errorf("a login form over the limit, chunked: %d\n%s", st, page)
	}
}
