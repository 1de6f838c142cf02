package review

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// serveBehindProxy is serve's handler as `serve --trusted-proxies
// 127.0.0.1` runs it: the test's requests come from a trusted proxy.
func serveBehindProxy(t *testing.T, f *fixture) *httptest.Server {
	t.Helper()
	ts := serve(t, f)
	proxies, err := clientaddr.Parse("127.0.0.1", clientaddr.XForwardedFor)
	if err != nil {
		t.Fatal(err)
	}
	behind := httptest.NewServer(proxies.Middleware(ts.Config.Handler))
	t.Cleanup(behind.Close)
	return behind
}

func from(client string, then func(*http.Request)) func(*http.Request) {
	return func(r *http.Request) {
		// A client's own X-Forwarded-For, then what the proxy appended.
		r.Header.Add("X-Forwarded-For", "192.0.2.66")
		r.Header.Add("X-Forwarded-For", client)
		if then != nil {
			then(r)
		}
	}
}

// TestLockoutPerClientBehindProxy: eight failed logins from one client
// behind the trusted proxy lock that client's address (and are audited
// with it), not the proxy's: another client behind the same proxy logs in.
func TestLockoutPerClientBehindProxy(t *testing.T) {
	f := newFixture(t)
	ts := serveBehindProxy(t, f)
	for i := range 8 {
		r := call(t, "GET", ts.URL+"/v1/review/exceptions", from("198.51.100.7", func(r *http.Request) {
			r.SetBasicAuth("guess"+string(rune('a'+i)), "wrong")
		}), "")
		if r.status != http.StatusUnauthorized && r.status != http.StatusTooManyRequests {
			t.Fatalf("failed login %d: %d %s", i, r.status, r.raw)
		}
	}
	if r := call(t, "GET", ts.URL+"/v1/review/exceptions", from("198.51.100.7", basic("alice")), ""); r.status != http.StatusTooManyRequests {
		t.Errorf("the guessing client with the right password: %d, want 429 (its address is locked)", r.status)
	}
	if r := call(t, "GET", ts.URL+"/v1/review/exceptions", from("198.51.100.8", basic("alice")), ""); r.status != http.StatusOK {
		t.Errorf("another client behind the same proxy: %d %s, want 200", r.status, r.raw)
	}
	if n := pgtest.Count(f.ctx, t, f.store, `SELECT count(*) FROM review_audit WHERE action = 'login_failed' AND detail = '198.51.100.7'`); n < 3 {
		t.Errorf("%d failed logins audited with the client's address, want at least 3", n)
	}
	if n := pgtest.Count(f.ctx, t, f.store, `SELECT count(*) FROM review_audit WHERE detail IN ('127.0.0.1', '192.0.2.66')`); n != 0 {
		t.Errorf("%d audit rows name the proxy or the client's forged address", n)
	}
}

// TestSecureCookieBehindProxy: the session cookie is Secure when the
// trusted proxy says the client's connection is HTTPS, and only then.
func TestSecureCookieBehindProxy(t *testing.T) {
	f := newFixture(t)
	ts := serveBehindProxy(t, f)
	for _, proto := range []string{"https", "http", ""} {
		c := newConsole(t, ts.URL)
		hdr := map[string]string{"X-Forwarded-For": "198.51.100.9"}
		if proto != "" {
			hdr["X-Forwarded-Proto"] = proto
		}
		st, h, _ := c.do("POST", "/review/login", url.Values{"name": {"alice"}, "password": {testPassword}, "next": {"/review/queue"}}, hdr)
		if st != http.StatusSeeOther {
			t.Fatalf("login (proto %q): %d", proto, st)
		}
		res := http.Response{Header: h}
		cookies := res.Cookies()
		if len(cookies) != 1 || cookies[0].Name != cookieName {
			t.Fatalf("login (proto %q) set cookies %v", proto, cookies)
		}
		if cookies[0].Secure != (proto == "https") {
			t.Errorf("X-Forwarded-Proto %q: cookie Secure %v", proto, cookies[0].Secure)
		}
	}
}
