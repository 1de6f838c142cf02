package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/internal/observe"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// TestServeObservedJSON runs serve with JSON logs and drives the SFTP and
// HTTP doors: each leaves its JSON log lines with the ids to follow it, and
// /metrics counts both the same way, with the database pool, the backlog and
// the Go runtime and process beside them.
func TestServeObservedJSON(t *testing.T) {
	url := pgtest.New(t)
	_, stderr, stop := startServe(t, "--database-url", url, "--data-dir", t.TempDir(), "--sftp-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--workers", "1", "--log-format", "json")
	var httpAddr, sftpAddr, hostKey string
	eventually.True(t, 60*time.Second, func() bool {
		for _, l := range logLines(t, stderr.String()) {
			switch l["msg"] {
			case "http listening":
				httpAddr, _ = l["addr"].(string)
			case "sftp listening":
				sftpAddr, _ = l["addr"].(string)
			case "ssh host key":
				if l["type"] == "ssh-ed25519" { // the key server.dial checks
					hostKey, _ = l["fingerprint"].(string)
				}
			}
		}
		return httpAddr != "" && sftpAddr != "" && hostKey != ""
	}, "serve started:\n%s", stderr)
	ctx := context.Background()
	st, err := records.Open(ctx, url, records.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys := addPartners(t, st, "acme")
	token, err := st.IssueAPIToken(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}

	srv := &server{t: t, sftpAddr: sftpAddr, hostKey: hostKey}
	c := srv.login("acme", keys["acme"])
	if err := c.upload("run-1.csv", payrollFile("a", 3)); err != nil {
		t.Fatal(err)
	}
	c.waitResult(t, "run-1.csv", 30*time.Second)

	req, _ := http.NewRequest("POST", "http://"+httpAddr+"/v1/submissions?name=run-2.csv", strings.NewReader(string(payrollFile("b", 2))))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "run-2")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	rid := res.Header.Get(observe.RequestIDHeader)
	if res.StatusCode != http.StatusCreated || len(rid) != 32 {
		t.Fatalf("submission: %s, request id %q", res.Status, rid)
	}

	res, err = http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	metrics := string(b)
	for _, want := range []string{
		`payintake_envelopes_total{outcome="processed",source="sftp"} 1`,
		`payintake_envelopes_total{outcome="processed",source="http"} 1`,
		`payintake_rows_total{outcome="created",source="sftp"} 3`,
		`payintake_rows_total{outcome="created",source="http"} 2`,
		`payintake_sftp_uploads_total{result="received"} 1`,
		`payintake_sftp_logins_total{result="ok"} 1`,
		`payintake_http_requests_total{method="POST",route="/v1/submissions",status="201"} 1`,
		`payintake_http_request_duration_seconds_count{method="POST",route="/v1/submissions"} 1`,
		`payintake_envelopes_waiting 0`,
		`payintake_oldest_waiting_envelope_age_seconds 0`,
		`payintake_processing_jobs{state="available"}`,
		`pgxpool_total_conns{pool="payintake"}`,
		`pgxpool_acquires_total{pool="payintake"}`,
		`pgxpool_acquire_seconds_total{pool="payintake"}`,
		`go_goroutines`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	promtoolCheckMetrics(t, metrics)
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}

	var upload, processed, httpLine map[string]any
	receipts := 0 // one upload, one line: Submit's, with the SFTP session's attributes
	for _, l := range logLines(t, stderr.String()) {
		if l["file"] == "run-1.csv" && (l["msg"] == "envelope received" || l["msg"] == "upload received") {
			receipts++
		}
		switch {
		case l["msg"] == "envelope received" && l["file"] == "run-1.csv":
			upload = l
		case l["msg"] == "envelope processed" && l["file"] == "run-1.csv":
			processed = l
		case l["msg"] == "http request" && l["request_id"] == rid:
			httpLine = l
		}
	}
	if receipts != 1 {
		t.Errorf("the upload of run-1.csv was logged as received %d times, want once:\n%s", receipts, stderr)
	}
	for _, c := range []struct {
		line map[string]any
		want map[string]any
	}{
		{upload, map[string]any{"door": "sftp", "partner": "acme", "status": "received"}},
		{processed, map[string]any{"door": "sftp", "partner": "acme", "status": "processed", "created": 3.0}},
		{httpLine, map[string]any{"door": "http", "partner": "acme", "status": 201.0, "created": 2.0, "key_hash": observe.KeyHash("run-2"),
			"route": "/v1/submissions", "level": "INFO"}},
	} {
		if c.line == nil {
			t.Errorf("no log line for %v:\n%s", c.want, stderr)
			continue
		}
		for k, v := range c.want {
			if c.line[k] != v {
				t.Errorf("%s line: %s = %v, want %v (%v)", c.line["msg"], k, c.line[k], v, c.line)
			}
		}
		if _, ok := c.line["envelope"].(float64); !ok {
			t.Errorf("%s line has no envelope id: %v", c.line["msg"], c.line)
		}
	}
	if strings.Contains(stderr.String(), token) || strings.Contains(stderr.String(), `"run-2"`) {
		t.Error("the API token or the Idempotency-Key is in the logs")
	}
}

// logLines parses JSON log lines (a partial last line is left out).
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			if !strings.HasSuffix(s, "\n") && strings.HasSuffix(s, sc.Text()) {
				break
			}
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// promtoolCheckMetrics fails t unless Prometheus's own linter accepts a
// scrape: metric names with their conventional suffixes (_total on a
// counter, base units such as _seconds), help text, no reserved names.
func promtoolCheckMetrics(t *testing.T, scrape string) {
	t.Helper()
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on /metrics: %v\n%s", err, out)
	}
}
