package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe runs `payintake serve` in the test and returns its stdout and
// stderr, and a stop function that returns the exit code.
func startServe(t *testing.T, args ...string) (stdout, stderr *lockedBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), stdout, stderr) }()
	stopped := false
	code := 0
	stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			select {
			case code = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("serve did not stop:\n%s", stderr)
			}
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return stdout, stderr, stop
}

// waitFor polls a buffer until re matches and returns the first group.
func waitFor(t *testing.T, b *lockedBuffer, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no match for %s in:\n%s", re, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeDemoWithOpenSSH(t *testing.T) {
	if _, err := os.Stat("/usr/bin/sftp"); err != nil {
		t.Fatalf("this test needs the OpenSSH sftp client: install the Debian package openssh-client (%v)", err)
	}
	url, data := pgtest.New(t), t.TempDir()
	args := []string{"--database-url", url, "--data-dir", data, "--sftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--demo", "--workers", "2"}
	stdout, stderr, stop := startServe(t, args...)

	putLine := waitFor(t, stdout, regexp.MustCompile(`(?m)^  (echo 'put .*)$`))
	getLine := waitFor(t, stdout, regexp.MustCompile(`(?m)^  (sftp .*:/results/.*)$`))
	httpAddr := waitFor(t, stderr, regexp.MustCompile(`msg="http listening" addr=(\S+)`))
	fp := waitFor(t, stderr, regexp.MustCompile(`msg="ssh host key" fingerprint=(\S+)`))

	// The printed command lines work as printed: upload from the source tree...
	sh := func(dir, line string) string {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", line)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s\nserver log:\n%s", line, err, out, stderr)
		}
		return string(out)
	}
	sh(filepath.Join("..", ".."), putLine)
	// ...and, once processed, download the result.
	down := t.TempDir()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command("/bin/sh", "-c", getLine)
		cmd.Dir = down
		if err := cmd.Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result to download:\n%s", stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res, err := os.ReadFile(filepath.Join(down, "clean-first-run.result.csv"))
	if err != nil || !strings.HasPrefix(string(res), "line,row,outcome,") || strings.Count(string(res), ",created,") != 8 {
		t.Fatalf("downloaded result: %v\n%s", err, res)
	}

	get := func(path string) string {
		resp, err := http.Get("http://" + httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
		}
		return string(b)
	}
	metrics := get("/metrics")
	for _, want := range []string{
		`payintake_sftp_uploads_total{result="received"} 1`,
		`payintake_envelopes_total{outcome="processed",source="sftp"} 1`,
		`payintake_rows_total{outcome="created",source="sftp"} 8`,
		`payintake_envelope_processing_seconds_count 1`,
		`payintake_sftp_upload_bytes_total`,
		`go_goroutines`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if get("/healthz") != "ok\n" || get("/readyz") != "ready\n" {
		t.Error("health endpoints")
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr)
	}

	// A restart keeps the host key and the demo key.
	key, _ := os.ReadFile(filepath.Join(data, "demo", "id_ed25519"))
	stdout2, stderr2, stop2 := startServe(t, args...)
	waitFor(t, stdout2, regexp.MustCompile(`(?m)^  (sftp .*)$`))
	if fp2 := waitFor(t, stderr2, regexp.MustCompile(`msg="ssh host key" fingerprint=(\S+)`)); fp2 != fp {
		t.Errorf("host key changed on restart: %s then %s", fp, fp2)
	}
	if key2, _ := os.ReadFile(filepath.Join(data, "demo", "id_ed25519")); !bytes.Equal(key, key2) {
		t.Error("demo key changed on restart")
	}
	if code := stop2(); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr2)
	}
}

func TestServeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--workers", "8", "--db-max-conns", "10"},
		{"--workers", "-1"},
		{"--max-file-size", "lots"},
		{"extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"serve"}, args...), &out, &errb); code != 2 {
			t.Errorf("serve %v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	for in, want := range map[string]int64{"1GiB": 1 << 30, "500MiB": 500 << 20, "64k": 64 << 10, "1048576": 1 << 20, "10 M": 10 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
