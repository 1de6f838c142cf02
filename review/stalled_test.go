package review

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/httpbody"
	"github.com/payintake/payintake/internal/openapicheck"
)

// Stalled bodies on the review API: refused before the body is needed (no
// credentials, a wrong content type, a declared size over the limit) they
// are answered at once and their connection closed; a reviewer's body that
// stalls is cut off after the body deadline with 408. Nothing is decided,
// and every answer is one the OpenAPI document declares.
func TestHostileStalledReviewBodies(t *testing.T) {
	f := newFixture(t)
	serve(t, f).Close() // adds the reviewers
	s := New(f.store, nil)
	s.Body = httpbody.Limits{Timeout: 700 * time.Millisecond, MinRate: 1 << 10}
	doc, err := os.ReadFile("../intake/httpapi/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(openapicheck.Handler(t, openapicheck.MustParse(t, doc), s))
	t.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	alice := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+testPassword))
	var report []string
	for _, c := range []struct {
		what, auth, ctype string
		length            int
		status            int
		within            time.Duration
	}{
		{"no credentials", "", "application/json", 1000, 401, time.Second},
		{"wrong password", "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:nope")), "application/json", 1000, 401, 2 * time.Second},
		{"not JSON", alice, "text/plain", 1000, 415, 2 * time.Second},
		{"reviewer, over 64 KiB", alice, "application/json", 64<<10 + 1, 413, 2 * time.Second},
		{"reviewer, stalled", alice, "application/json", 1000, 408, s.Body.Timeout + 2*time.Second},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		fmt.Fprintf(conn, "POST /v1/review/bulk/approve HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", addr, c.ctype, c.length)
		if c.auth != "" {
			fmt.Fprintf(conn, "Authorization: %s\r\n", c.auth)
		}
		fmt.Fprintf(conn, "\r\n{\"partner\": \"acme\", \"dry_run\": ")
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // the test's own bound
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", c.what, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		took := time.Since(start)
		_, err = br.ReadByte()
		closed := err == io.EOF && time.Since(start) < 10*time.Second
		conn.Close()
		report = append(report, fmt.Sprintf("%s %d in %v", c.what, resp.StatusCode, took.Round(time.Millisecond)))
		if resp.StatusCode != c.status || took > c.within || !closed {
			t.Errorf("%s: %d after %v, closed %v; want %d within %v and the connection closed", c.what, resp.StatusCode, took, closed, c.status, c.within)
		}
	}
	if n := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open'`); n != 3 {
		t.Errorf("%d exceptions open, want 3", n)
	}
	t.Logf("SUMMARY stalled review bulk bodies (body deadline %v, no server read timeout): %s", s.Body.Timeout, strings.Join(report, "; "))
}
