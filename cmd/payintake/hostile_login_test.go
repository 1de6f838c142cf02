package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// loginRSSBound is the stated bound on serve's peak RSS under a storm of
// 200 parallel reviewer logins (before: 3.4 GiB).
const loginRSSBound = 200 << 20

// 200 parallel HTTP Basic logins (wrong passwords, known and unknown names)
// against a running serve: password checks are rationed, so memory stays
// bounded; then failed logins lock the account, the right password is
// refused with 429 until `payintake reviewer unlock` lifts the lock.
func TestHostileLoginStorm(t *testing.T) {
	url := pgtest.New(t)
	c := &cli{t: t, url: url, dir: t.TempDir()}
	out := c.ok("reviewer", "add", "alice")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	pw := lines[len(lines)-1]
	srv := startServer(t, url, t.TempDir(), nil, "--workers", "1")
	base := "http://" + srv.httpAddr
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 200}}
	login := func(name, password string) (int, string) {
		req, err := http.NewRequestWithContext(context.Background(), "POST", base+"/v1/review/token", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(name, password)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	before := srv.vmHWM()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "alice"
			if i%2 == 1 {
				name = fmt.Sprintf("nobody-%d", i) // unknown names cost the same
			}
			code, ra := login(name, "wrong password")
			if (code == 429 || code == 503) && ra == "" {
				t.Errorf("%d without Retry-After", code)
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	peak := srv.vmHWM()
	t.Logf("SUMMARY 200 parallel reviewer logins: answered in %v (%d×401 wrong, %d×429 locked, %d×503 busy, %d other); serve peak RSS %d MiB before, %d MiB after (bound %d MiB; before the fix 3.4 GiB)",
		took.Round(time.Millisecond), codes[401], codes[429], codes[503], 200-codes[401]-codes[429]-codes[503],
		before>>20, peak>>20, loginRSSBound>>20)
	if codes[401]+codes[429]+codes[503] != 200 {
		t.Errorf("answers %v: every login must be 401, 429 or 503", codes)
	}
	if peak > loginRSSBound {
		t.Errorf("serve peak RSS %d MiB, bound %d MiB", peak>>20, loginRSSBound>>20)
	}
	if !srv.healthy() {
		t.Fatal("serve unhealthy after the login storm")
	}
	// The account is locked: the right password is refused too.
	if code, ra := login("alice", pw); code != 429 || ra == "" {
		t.Fatalf("right password after a storm of wrong ones: %d (Retry-After %q), want 429", code, ra)
	}
	// The operator lifts the lock (of the account, and of the address the
	// storm came from).
	if out := c.ok("reviewer", "unlock", "alice"); !strings.Contains(out, "account alice unlocked") {
		t.Fatalf("unlock: %q", out)
	}
	if out := c.ok("reviewer", "unlock", "--address", "127.0.0.1"); !strings.Contains(out, "address 127.0.0.1 unlocked") {
		t.Fatalf("unlock address: %q", out)
	}
	if code, _ := login("alice", pw); code != 201 {
		t.Fatalf("right password after unlock: %d, want 201", code)
	}
	if out := c.ok("reviewer", "unlock", "alice"); !strings.Contains(out, "nothing to unlock") {
		t.Fatalf("second unlock: %q", out)
	}
	if code, _, _ := c.run("reviewer", "unlock"); code != 2 {
		t.Fatalf("unlock without a name: exit %d, want 2", code)
	}
}
