package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/syncbuf"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// freePort returns a loopback port free at the time of the call.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startHAProxy runs Debian's HAProxy in the foreground with cfg until the
// test ends, and waits until addr accepts connections.
func startHAProxy(t *testing.T, cfg, addr string) {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/haproxy"); err != nil {
		t.Fatalf("this test needs HAProxy: install the Debian package haproxy (%v)", err)
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	cmd := exec.Command("/usr/sbin/haproxy", "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy:\n%s", logs)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not listen on %s: %v\n%s", addr, err, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeBehindHAProxy: serve behind HAProxy (SFTP in TCP mode with
// send-proxy-v2, HTTP with option forwardfor; HAProxy connects from
// 127.0.0.2, the trusted proxy), as docs/proxies.md configures it, with
// clients bound to 127.0.0.3 and 127.0.0.4. Eight failed reviewer logins
// from one client lock it out and not the other; OpenSSH's sftp is logged
// as its own address; a partner's --allow-from admits one client and
// refuses the other like a wrong key.
func TestServeBehindHAProxy(t *testing.T) {
	url, data := pgtest.New(t), t.TempDir()
	stdout, stderr, _ := startServe(t, "--database-url", url, "--data-dir", data, "--sftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--workers", "0", "--demo", "--trusted-proxies", "127.0.0.2")
	httpAddr := waitFor(t, stderr, regexp.MustCompile(`msg="http listening" addr=(\S+)`))
	sftpAddr := waitFor(t, stderr, regexp.MustCompile(`msg="sftp listening" addr=(\S+)`))
	password := waitFor(t, stdout, regexp.MustCompile(`password \(shown once\): (\S+)`))
	lbSFTP, lbHTTP := freePort(t), freePort(t)
	startHAProxy(t, fmt.Sprintf(`
defaults
    timeout connect 5s
    timeout client 1m
    timeout server 1m

frontend sftp
    mode tcp
    bind %s
    default_backend payintake_sftp

backend payintake_sftp
    mode tcp
    server app1 %s send-proxy-v2 source 127.0.0.2

frontend http
    mode http
    bind %s
    option forwardfor
    default_backend payintake_http

backend payintake_http
    mode http
    server app1 %s source 127.0.0.2
`, lbSFTP, sftpAddr, lbHTTP, httpAddr), lbHTTP)

	reviewAPI := func(from, user, pw string) string {
		return curl(t, "-o", "/dev/null", "-w", "%{http_code}", "--interface", from, "-u", user+":"+pw, "http://"+lbHTTP+"/v1/review/exceptions")
	}
	for i := range 8 {
		if code := reviewAPI("127.0.0.3", fmt.Sprintf("guess%d", i), "wrong"); code != "401" && code != "429" {
			t.Fatalf("failed login %d: %s", i, code)
		}
	}
	if code := reviewAPI("127.0.0.3", "demo-reviewer", password); code != "429" {
		t.Errorf("the guessing client with the right password: %s, want 429", code)
	}
	if code := reviewAPI("127.0.0.4", "demo-reviewer", password); code != "200" {
		t.Errorf("another client behind the same HAProxy: %s, want 200", code)
	}
	waitFor(t, stderr, regexp.MustCompile(`(?m)(route=/v1/review/exceptions .*status=200 .*client=127\.0\.0\.4 proxy=127\.0\.0\.2:\d+)`))

	host, port, _ := net.SplitHostPort(lbSFTP)
	key := filepath.Join(data, "demo", "id_ed25519")
	sftp := func(from string) (string, error) {
		cmd := exec.Command("/usr/bin/sftp", "-b", "-", "-P", port, "-i", key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BindAddress="+from, "demo@"+host)
		cmd.Stdin = strings.NewReader("ls /inbox\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := sftp("127.0.0.3"); err != nil {
		t.Fatalf("sftp through HAProxy: %v\n%s", err, out)
	}
	waitFor(t, stderr, regexp.MustCompile(`(msg="logged in" .*remote=127\.0\.0\.3:\d+ proxy=127\.0\.0\.2:\d+ .*partner=demo)`))

	c := &cli{t: t, url: url, dir: t.TempDir()}
	c.ok("partner", "set", "demo", "--allow-from", "127.0.0.4")
	if out, err := sftp("127.0.0.3"); err == nil || !strings.Contains(out, "Permission denied (publickey)") {
		t.Errorf("sftp from outside the allowlist: %v\n%s", err, out)
	}
	waitFor(t, stderr, regexp.MustCompile(`(msg="login failed" .*remote=127\.0\.0\.3:\d+ proxy=127\.0\.0\.2:\d+ .*allow-from: 127\.0\.0\.3)`))
	if out, err := sftp("127.0.0.4"); err != nil {
		t.Errorf("sftp from the allowlist: %v\n%s", err, out)
	}
	if !strings.Contains(c.ok("partner", "list"), "127.0.0.4/32") {
		t.Error("partner list does not show the allowlist")
	}
}
