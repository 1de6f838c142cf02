package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/pgserver/pgtest"
)

func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An outsider on a public --http-addr scrapes /metrics (partner ids in
// labels, backlog, pool figures). With --metrics-token-file only a scraper
// sending the token reads them; with --metrics-addr they are not on the
// public address at all, only on the private one (here with the token too).
func TestHostileMetricsAccess(t *testing.T) {
	url := pgtest.New(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "metrics.token")
	const token = "3f1c0a9e5b7d2468ace0fdb97531eca8"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var tried, refused int
	want := func(srv, what string, got, status int, body string) {
		t.Helper()
		tried++
		if got != status {
			t.Errorf("%s: %s answered %d, want %d: %s", srv, what, got, status, tail(body, 300))
		} else if status != http.StatusOK {
			refused++
		}
		if status == http.StatusOK && !strings.Contains(body, "payintake_envelopes_waiting") {
			t.Errorf("%s: %s: no payintake metrics: %s", srv, what, tail(body, 300))
		}
		if status != http.StatusOK && strings.Contains(body, "payintake_") {
			t.Errorf("%s: %s refused but shows metrics", srv, what)
		}
	}

	// Token only: /metrics on --http-addr, behind the token; health stays open.
	s := startServer(t, url, filepath.Join(dir, "a"), nil, "--metrics-token-file", tokenFile)
	m := "http://" + s.httpAddr + "/metrics"
	st, body := scrape(t, m, "")
	want("token", "no token", st, http.StatusUnauthorized, body)
	st, body = scrape(t, m, "wrong-token-wrong-token")
	want("token", "a wrong token", st, http.StatusUnauthorized, body)
	st, body = scrape(t, m, token[:len(token)-1])
	want("token", "the token less its last byte", st, http.StatusUnauthorized, body)
	st, body = scrape(t, m, token)
	want("token", "the token", st, http.StatusOK, body)
	if code, _ := s.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz behind the metrics token: %d", code)
	}
	s.stop()

	// A separate address (with the token, through the environment).
	s = startServer(t, url, filepath.Join(dir, "b"), []string{"PAYINTAKE_METRICS_TOKEN_FILE=" + tokenFile}, "--metrics-addr", "127.0.0.1:0")
	var metricsAddr string
	eventually.NoError(t, 10*time.Second, func() error {
		if metricsAddr = match(s.logs.String(), `msg="metrics listening" addr=(\S+) token=true`); metricsAddr == "" {
			return fmt.Errorf("no metrics listener with a token logged:\n%s", tail(s.logs.String(), 2000))
		}
		return nil
	})
	st, body = scrape(t, "http://"+s.httpAddr+"/metrics", token)
	want("separate", "/metrics on the public address, with the token", st, http.StatusNotFound, body)
	st, body = scrape(t, "http://"+metricsAddr+"/metrics", "")
	want("separate", "no token on the metrics address", st, http.StatusUnauthorized, body)
	st, body = scrape(t, "http://"+metricsAddr+"/metrics", token)
	want("separate", "the token on the metrics address", st, http.StatusOK, body)
	st, body = scrape(t, "http://"+metricsAddr+"/v1/openapi.json", token)
	want("separate", "the API on the metrics address", st, http.StatusNotFound, body)
	if code, _ := s.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz on the public address: %d", code)
	}
	// A token too short to be a secret is refused at start.
	short := filepath.Join(dir, "short.token")
	if err := os.WriteFile(short, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := run(t.Context(), []string{"serve", "--database-url", url, "--data-dir", filepath.Join(dir, "c"), "--metrics-token-file", short}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "at least 16 characters") {
		t.Errorf("a 6-character token: exit %d: %s", code, errb.String())
	}
	t.Logf("SUMMARY metrics-access: %d scrapes without the right token or on the wrong address, %d refused (401 or 404) and none showed a metric; the token scraped both set-ups", tried-2, refused)
}
