package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/httpbody"
)

// Stalled webhook bodies: 40 senders each send their headers and a few
// bytes of a 1,000-byte body, then nothing. With 8 reading slots and a
// 300 ms body deadline, each stalled sender is answered 408 and its
// connection closed; senders beyond the slots get 503 with Retry-After
// instead of a held socket; then a real delivery goes through. Before,
// 400 stalled bodies held 485 MiB and 400 sockets for 40 s.
func TestHostileSlowWebhookBodies(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	e := newEnv(t, Config{WebhookReadTimeout: timeout, WebhooksReading: 8})
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	stall := func() (int, string, time.Duration) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return 0, "", 0
		}
		defer c.Close()
		start := time.Now()
		fmt.Fprintf(c, "POST /v1/webhooks/acme HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"+
			"webhook-id: msg_slow\r\nwebhook-timestamp: 1\r\nwebhook-signature: v1,AAAA\r\n\r\n{\"entity_id\":")
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // the test's own bound: the server must answer well before
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("stalled sender got no answer: %v", err)
			return 0, "", time.Since(start)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After"), time.Since(start)
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var slowest time.Duration
	atOnce(40, func(int) {
		code, ra, took := stall()
		mu.Lock()
		defer mu.Unlock()
		codes[code]++
		slowest = max(slowest, took)
		if code == 503 && ra == "" {
			t.Errorf("503 without Retry-After")
		}
	})
	t.Logf("SUMMARY 40 stalled webhook bodies, 8 reading slots, %v body deadline: %d×408 (answered and closed), %d×503 busy with Retry-After, %d other; slowest answer %v",
		timeout, codes[408], codes[503], 40-codes[408]-codes[503], slowest.Round(time.Millisecond))
	if codes[408] < 8 || codes[503] == 0 || codes[408]+codes[503] != 40 {
		t.Errorf("answers %v: want every stalled sender answered 408 or 503, at least 8 of them 408 and some 503", codes)
	}
	if slowest > timeout+3*time.Second {
		t.Errorf("slowest stalled sender answered after %v", slowest)
	}
	// A real delivery still goes through.
	wantOutcome(t, e.hook("acme", "msg_ok", change("pl-1", 1, "E1", "100.00")), "created", "", 1)
	if n := e.count(`SELECT count(*) FROM webhook_deliveries`); n != 1 {
		t.Errorf("%d deliveries stored, want 1 (nothing of the stalled ones)", n)
	}
}

// A malformed partner in a webhook URL (invalid UTF-8, upper case, too
// long, control characters) gets exactly the answer of an unknown partner,
// never a 500. Before, invalid UTF-8 gave a 500.
func TestHostileMalformedWebhookPartner(t *testing.T) {
	e := newEnv(t, Config{})
	body := change("pl-1", 1, "E1", "100.00")
	send := func(escapedPartner string) resp {
		ts := time.Now()
		sig, err := Sign(e.secret["acme"], "msg_1", ts.Unix(), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", e.srv.URL+"/v1/webhooks/"+escapedPartner, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-id", "msg_1")
		req.Header.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
		req.Header.Set("webhook-signature", sig)
		return e.do(req)
	}
	unknown := send("nobody")
	wantProblem(t, unknown, http.StatusUnauthorized, "signature_invalid")
	cases := []string{"%FF", "acme%FF", "%C0%AF", "ACME", "a%00b", "a%E2%80%AEb", strings.Repeat("a", 64), "%20acme"}
	for _, p := range cases {
		r := send(p)
		if r.status != unknown.status || string(r.body) != string(unknown.body) {
			t.Errorf("partner %s: %d %s, want the unknown partner's %d %s", p, r.status, r.body, unknown.status, unknown.body)
		}
	}
	t.Logf("SUMMARY %d malformed webhook partners (invalid UTF-8, NUL, U+202E, upper case, 64 characters): every one answered %d like an unknown partner, 0 server errors",
		len(cases), unknown.status)
}

// stalledRequest sends a request's headers and the first bytes of a body
// it announces as 100,000 bytes, then nothing, and returns the answer's
// status, how long it took, and whether the server then closed the
// connection (rather than waiting, up to its read timeout, for the body).
func stalledRequest(t *testing.T, addr, method, path string, header http.Header) (status int, took time.Duration, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	var h strings.Builder
	_ = header.Write(&h)
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n%s\r\n{\"rows\":", method, path, h.String())
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // the test's own bound
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", method, path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	took = time.Since(start)
	_, err = br.ReadByte()
	return resp.StatusCode, took, err == io.EOF && time.Since(start) < 10*time.Second
}

// Stalled bodies on the API's endpoints that take one: refused ones
// (unauthenticated, a bad token, too large) are answered at once and their
// connection closed; authenticated ones are cut off after the body
// deadline with 408. Before, Go's server read up to 256 KiB of a refused
// body before answering, so each stalled stranger held its connection for
// the whole read timeout (5 minutes in serve; here the test server has
// none at all).
func TestHostileStalledBodies(t *testing.T) {
	const bodyTimeout = 700 * time.Millisecond
	e := newEnv(t, Config{Body: httpbody.Limits{Timeout: bodyTimeout, MinRate: 1 << 10}})
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	id := submissionID(t, e.submit("acme", "run-1", "march.csv", csvRows("E001,2026-03,BASE,abc,USD")))
	auth := func(tok string) http.Header {
		return http.Header{"Authorization": {"Bearer " + tok}, "Idempotency-Key": {"k-stalled"}, "Content-Type": {"application/json"}}
	}
	replays := fmt.Sprintf("/v1/submissions/%d/replays", id)
	var report []string
	for _, c := range []struct {
		what, method, path string
		header             http.Header
		status             int
		within             time.Duration
	}{
		{"submission, no token", "POST", "/v1/submissions?name=a.csv", http.Header{"Idempotency-Key": {"k"}}, 401, time.Second},
		{"submission, bad token", "POST", "/v1/submissions?name=a.csv", auth("pit_bad"), 401, time.Second},
		{"replay, no token", "POST", replays, http.Header{"Idempotency-Key": {"k"}}, 401, time.Second},
		{"replay, another partner's token", "POST", replays, auth(e.token["other"]), 404, time.Second},
		{"submission, authenticated", "POST", "/v1/submissions?name=a.csv", auth(e.token["acme"]), 408, bodyTimeout + 2*time.Second},
		{"replay, authenticated", "POST", replays, auth(e.token["acme"]), 408, bodyTimeout + 2*time.Second},
	} {
		status, took, closed := stalledRequest(t, addr, c.method, c.path, c.header)
		report = append(report, fmt.Sprintf("%s %d in %v", c.what, status, took.Round(time.Millisecond)))
		if status != c.status || took > c.within || !closed {
			t.Errorf("%s: %d after %v, closed %v; want %d within %v and the connection closed", c.what, status, took, closed, c.status, c.within)
		}
	}
	if n := e.count(`SELECT count(*) FROM envelopes`); n != 1 {
		t.Errorf("%d envelopes; want only the first submission's", n)
	}
	t.Logf("SUMMARY stalled bodies (body deadline %v, no server read timeout): %s", bodyTimeout, strings.Join(report, "; "))
}
