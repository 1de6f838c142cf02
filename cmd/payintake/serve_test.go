package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	neturl "net/url"
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

// startServe runs `payintake serve` in the test and returns its stdout and
// stderr, and a stop function that returns the exit code.
func startServe(t *testing.T, args ...string) (stdout, stderr *syncbuf.Buffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncbuf.Buffer{}, &syncbuf.Buffer{}
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
func waitFor(t *testing.T, b *syncbuf.Buffer, re *regexp.Regexp) string {
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

	// The interactive login line, as printed, with commands on its stdin.
	login := waitFor(t, stdout, regexp.MustCompile(`(?m)^  (sftp -i [^\n]* demo@[^\s:]+)$`))
	cmd := exec.Command("/bin/sh", "-c", login)
	cmd.Stdin = strings.NewReader("ls /results\n")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "clean-first-run.result.csv") {
		t.Fatalf("%s with `ls /results` on stdin: %v\n%s", login, err, out)
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
		`payintake_envelope_processing_seconds_count 3`, // the upload, and the demo-hr partner's two files
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
	// The rest of the demo: held exceptions, the console, the API and a webhook.
	if held := waitFor(t, stdout, regexp.MustCompile(`a late\ncorrected file arrived: (\d+) row\(s\) are held`)); held != "2" {
		t.Fatalf("%s rows held for demo-hr, want 2", held)
	}
	consoleURL := waitFor(t, stdout, regexp.MustCompile(`(?m)^  (http://\S+/review/)$`))
	reviewer := waitFor(t, stdout, regexp.MustCompile(`(?m)^  reviewer: (\S+)$`))
	password := waitFor(t, stdout, regexp.MustCompile(`(?m)^  password \(shown once\): (\S+)$`))
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.PostForm(strings.TrimSuffix(consoleURL, "/")+"/login", neturl.Values{"name": {reviewer}, "password": {password}, "next": {"/review/queue"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `data-status="open">open <span class="count">2</span>`) || !strings.Contains(string(page), "demo-hr") {
		t.Fatalf("console after logging in as printed: %s\n%s", resp.Status, page)
	}
	submit := waitFor(t, stdout, regexp.MustCompile(`(?m)^  (curl .*/v1/submissions.*)$`))
	if out := sh(filepath.Join("..", ".."), submit); !strings.Contains(out, `"created": 5`) && !strings.Contains(out, `"created":5`) {
		t.Fatalf("%s:\n%s", submit, out)
	}
	hook := waitFor(t, stdout, regexp.MustCompile(`(?s)\n  (body=.*?/v1/webhooks/demo.*?)\n`))
	hook = strings.ReplaceAll(hook, "\n  ", "\n")
	if out := sh(t.TempDir(), hook); !strings.Contains(out, `"outcome":"created"`) && !strings.Contains(out, `"outcome": "created"`) {
		t.Fatalf("%s:\n%s", hook, out)
	}

	// The vendor target: lock the sample's period as printed (the commands
	// run from the source tree), then watch the run complete with the
	// printed status line: the 8 rows of the SFTP sample and the 5 of the
	// curl submission, all of 2026-11 (the webhook's line is of 2026-12).
	lock := waitFor(t, stdout, regexp.MustCompile(`(?m)^  (\S.* records lock --partner demo --period 2026-11)$`))
	status := waitFor(t, stdout, regexp.MustCompile(`(?m)^  (\S.* dispatch status --partner demo)$`))
	sh(filepath.Join("..", ".."), lock)
	for deadline := time.Now().Add(60 * time.Second); ; {
		out := sh(filepath.Join("..", ".."), status)
		if regexp.MustCompile(`(?m)^demo\s+2026-11\s+1\s+\S+\s+complete\s+13\s+13\s`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed the 13 lines of 2026-11 dispatched:\n%s\nserver log:\n%s", status, out, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Along the way the demo vendor answered 429 and 207 (chunks of 2: 7
	// chunks, the 5th request a 429, the 7th a 207), and the run still
	// completed with all 13 lines: both were handled.
	metrics = get("/metrics")
	for _, want := range []string{`payintake_dispatch_requests_total{status="429"} `, `payintake_dispatch_requests_total{status="207"} `,
		`payintake_dispatch_lines_total{result="succeeded"} 13`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("after the demo dispatch, /metrics lacks %s", want)
		}
	}

	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr)
	}

	// A restart keeps the host key and the demo key.
	key, _ := os.ReadFile(filepath.Join(data, "demo", "id_ed25519"))
	stdout2, stderr2, stop2 := startServe(t, args...)
	waitFor(t, stdout2, regexp.MustCompile(`(?m)^  (sftp .*)$`))
	waitFor(t, stdout2, regexp.MustCompile(`(Webhook secret)`)) // the demo is set up again
	if !strings.Contains(stdout2.String(), "as demo-reviewer (its password was printed when the demo first ran") ||
		strings.Contains(stdout2.String(), "are held") {
		t.Errorf("restarted demo:\n%s", stdout2)
	}
	if fp2 := waitFor(t, stderr2, regexp.MustCompile(`msg="ssh host key" fingerprint=(\S+)`)); fp2 != fp {
		t.Errorf("host key changed on restart: %s then %s", fp, fp2)
	}
	if key2, _ := os.ReadFile(filepath.Join(data, "demo", "id_ed25519")); !bytes.Equal(key, key2) {
		t.Error("demo key changed on restart")
	}
	// The restart's line for a new password works as printed, and the
	// password it prints opens the console.
	setPassword := waitFor(t, stdout2, regexp.MustCompile("`([^`]* reviewer password demo-reviewer)`"))
	newPassword := strings.TrimSpace(sh(filepath.Join("..", ".."), setPassword))
	newPassword = newPassword[strings.LastIndex(newPassword, "\n")+1:]
	httpAddr2 := waitFor(t, stderr2, regexp.MustCompile(`msg="http listening" addr=(\S+)`))
	jar2, _ := cookiejar.New(nil)
	resp, err = (&http.Client{Jar: jar2}).PostForm("http://"+httpAddr2+"/review/login", neturl.Values{"name": {"demo-reviewer"}, "password": {newPassword}, "next": {"/review/queue"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "demo-hr") {
		t.Fatalf("console after %s (password %q): %s\n%s", setPassword, newPassword, resp.Status, page)
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
