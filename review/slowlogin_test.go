package review

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A console login whose form stalls after a few bytes is answered 408
// and its connection closed after LoginReadTimeout; it is not counted as
// a failed login.
func TestHostileStalledLoginForm(t *testing.T) {
	f := newFixture(t)
	s := New(f.store, nil)
	s.LoginReadTimeout = 300 * time.Millisecond
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /review/login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nname=al", strings.TrimPrefix(ts.URL, "http://"))
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("stalled login form got no answer: %v", err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("SUMMARY stalled /review/login form: answered %d after %v (deadline %v)", resp.StatusCode, took.Round(time.Millisecond), s.LoginReadTimeout)
	if resp.StatusCode != http.StatusRequestTimeout || took > 5*time.Second || !strings.Contains(string(page), "The form arrived too slowly") {
		t.Errorf("stalled login: %d after %v, want 408 within seconds saying the form was too slow:\n%s", resp.StatusCode, took, page)
	}
	if n := f.count(`SELECT count(*) FROM login_failures`); n != 0 {
		t.Errorf("a stalled form counted as %d failed logins", n)
	}
}
