package notify_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// clock is a time the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now().Truncate(time.Millisecond)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// fixture is a database with partner acme, its webhook secret and its
// notify URL (set by the test), and an Intake to send files with.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	st     *records.Store
	in     *intake.Intake
	secret string
	dir    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st := pgtest.Store(t)
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	secret, err := st.AddWebhookSecret(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, st: st, in: intake.New(st, nil), secret: secret, dir: t.TempDir()}
}

func (f *fixture) setURL(partner, url string) {
	f.t.Helper()
	if err := f.st.UpdatePartner(f.ctx, partner, records.PartnerUpdate{NotifyURL: &url}); err != nil {
		f.t.Fatal(err)
	}
}

// send uploads a file as partner would and processes it.
func (f *fixture) send(partner, name, content string) records.Envelope {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	_, out, err := f.in.IngestFile(f.ctx, partner, p, "test")
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) count(q string, args ...any) int {
	f.t.Helper()
	return pgtest.Count(f.ctx, f.t, f.st, q, args...)
}

// request is one request the Node receiver saw.
type request struct {
	N           int               `json:"n"`
	Method      string            `json:"method"`
	ContentType string            `json:"content_type"`
	Headers     map[string]string `json:"headers"`
	Body        string            `json:"body"`
	Verified    []bool            `json:"verified"`
}

// nodeReceiver starts testdata/receiver.js (the official Standard Webhooks
// library, installed in .ci/npm by .ci/run), failing the first failures
// requests and verifying with secrets. It returns its URL and the
// requests it reports.
func nodeReceiver(t *testing.T, failures string, secrets ...string) (string, <-chan request) {
	t.Helper()
	modules, err := filepath.Abs("../.ci/npm/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "standardwebhooks")); err != nil {
		t.Fatalf("the official Standard Webhooks library is not installed (%v): run .ci/run, or `npm ci` in .ci/npm", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to run the Standard Webhooks verifier (apt-get install nodejs, as .ci/run does): %v", err)
	}
	cmd := exec.Command(node, append([]string{"testdata/receiver.js", failures}, secrets...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() {
		t.Fatalf("the receiver did not start: %v", sc.Err())
	}
	var hello struct{ Port int }
	if err := json.Unmarshal(sc.Bytes(), &hello); err != nil || hello.Port == 0 {
		t.Fatalf("receiver said %q: %v", sc.Text(), err)
	}
	reqs := make(chan request, 100)
	go func() {
		for sc.Scan() {
			var r request
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Errorf("receiver said %q: %v", sc.Text(), err)
				continue
			}
			reqs <- r
		}
	}()
	return "http://127.0.0.1:" + itoa(hello.Port) + "/payintake-events", reqs
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// next returns the receiver's next request, which must come within 10s.
func next(t *testing.T, reqs <-chan request) request {
	t.Helper()
	select {
	case r := <-reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver got no request within 10s")
		return request{}
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }
