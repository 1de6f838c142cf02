package httpapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
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
