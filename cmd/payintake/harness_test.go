package main

// A harness for the reliability tests: the real payintake binary, built once
// per test process, run as `serve` subprocesses on loopback ports, with real
// SFTP clients. See RELIABILITY.md for what each test shows.

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/internal/syncbuf"

	"github.com/pkg/sftp"
	"github.com/riverqueue/river/rivertype"
	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/intaketest"
	"github.com/payintake/payintake/records"
)

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// payintakeBinary builds ./cmd/payintake once per test process.
func payintakeBinary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "payintake-bin-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "payintake")
		out, err := exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// removeBinary is called by TestMain.
func removeBinary() {
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
}

// server is one `payintake serve` subprocess.
type server struct {
	t        testing.TB
	cmd      *exec.Cmd
	logs     *syncbuf.Buffer
	sftpAddr string
	httpAddr string
	hostKey  string // SHA256 fingerprint
	dataDir  string
	done     chan struct{}
	state    *os.ProcessState
}

// testServersSecretKey is the secret key of the serve processes tests start.
var testServersSecretKey = records.FormatSecretKey(bytes.Repeat([]byte{7}, records.SecretKeyLen))

// startServer runs serve on url with data dir dir, extra flags and
// environment (e.g. PAYINTAKE_FAULT=mid-apply), and waits until it listens.
func startServer(t testing.TB, url, dir string, env []string, flags ...string) *server {
	t.Helper()
	return startServerUnder(t, nil, url, dir, env, flags...)
}

// startServerUnder is startServer with serve run by a wrapper command
// (e.g. prlimit --nofile=300 --).
func startServerUnder(t testing.TB, wrapper []string, url, dir string, env []string, flags ...string) *server {
	t.Helper()
	args := append([]string{"serve", "--database-url", url, "--data-dir", dir,
		"--sftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--orphan-after", "1s"}, flags...)
	// A wrapper such as prlimit execs serve: the process is serve's.
	argv := append(append(slices.Clone(wrapper), payintakeBinary(t)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	s := &server{t: t, cmd: cmd, logs: &syncbuf.Buffer{}, dataDir: dir, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.Discard, s.logs
	// Servers on one database share the secret key that seals its host keys
	// and webhook secrets, as every deployment must (docs/fleet.md); env
	// may give another.
	cmd.Env = append(append(os.Environ(), secretKeyEnv+"="+testServersSecretKey), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		s.state = cmd.ProcessState
		close(s.done)
	}()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("serve (pid %d) log tail:\n%s", cmd.Process.Pid, tail(s.logs.String(), 4000))
		}
	})
	eventually.NoError(t, 60*time.Second, func() error {
		l := s.logs.String()
		select {
		case <-s.done:
			t.Fatalf("serve exited while starting: %v\n%s", s.state, l)
		default:
		}
		s.sftpAddr = match(l, `msg="sftp listening" addr=(\S+)`)
		s.httpAddr = match(l, `msg="http listening" addr=(\S+)`)
		s.hostKey = match(l, `msg="ssh host key" fingerprint=(\S+) type=ssh-ed25519`)
		if s.sftpAddr == "" || s.httpAddr == "" || s.hostKey == "" {
			return fmt.Errorf("serve did not start:\n%s", l)
		}
		return nil
	})
	return s
}

func match(s, re string) string {
	if m := regexp.MustCompile(re).FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// kill sends SIGKILL (if still running) and waits.
func (s *server) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if !s.state.Success() {
			s.t.Errorf("serve exited with %v", s.state)
		}
	case <-time.After(60 * time.Second):
		s.t.Fatalf("serve did not stop on SIGTERM")
	}
}

// stopIdle stops the server (as stop) once no processing job is queued or
// running in it. A job still in flight at SIGTERM (a second job of an
// envelope already processed, say) is cancelled and retried seconds later
// by whichever server runs next; in a server started with PAYINTAKE_FAULT
// that job, for a file of an earlier run, reaches the fault point first
// and kills the server before the run it was started for. since is the
// database's time before this server started: a job a killed server left
// "running" (attempted before it) is not waited for, as River rescues it
// only after the job timeout.
func (s *server) stopIdle(st *records.Store, since time.Time, within time.Duration) {
	s.t.Helper()
	eventually.NoError(s.t, within, func() error {
		var busy []string
		for _, j := range intaketest.ProcessJobs(s.t, st.Pool(), "", rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateScheduled, rivertype.JobStateRunning) {
			if j.State != rivertype.JobStateRunning || j.AttemptedAt == nil || !j.AttemptedAt.Before(since) {
				busy = append(busy, fmt.Sprintf("job %d %s %s", j.ID, j.State, j.EncodedArgs))
			}
		}
		if len(busy) == 0 {
			return nil
		}
		select {
		case <-s.done:
			s.t.Fatalf("serve exited with %v while jobs were waiting: %v", s.state, busy)
		default:
		}
		return fmt.Errorf("jobs still queued or running: %v", busy)
	})
	s.stop()
}

// dbNow is the database's clock, as River's timestamps are.
func dbNow(t testing.TB, st *records.Store) time.Time {
	t.Helper()
	var now time.Time
	if err := st.Pool().QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// waitKilled waits for the process to die of SIGKILL (a fault hook).
func (s *server) waitKilled(within time.Duration) {
	s.t.Helper()
	select {
	case <-s.done:
		ws, ok := s.state.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			s.t.Fatalf("serve ended with %v, want killed by SIGKILL", s.state)
		}
	case <-time.After(within):
		s.t.Fatalf("the fault hook did not fire within %v:\n%s", within, tail(s.logs.String(), 3000))
	}
}

func (s *server) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// vmHWM is the peak resident memory of the process, in bytes.
func (s *server) vmHWM() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	kb, _ := strconv.ParseInt(match(string(b), `VmHWM:\s+(\d+) kB`), 10, 64)
	return kb << 10
}

func (s *server) get(path string) (int, string) {
	resp, err := http.Get("http://" + s.httpAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *server) healthy() bool {
	code, _ := s.get("/healthz")
	return code == 200
}

// addPartners creates partners with one fresh key each.
func addPartners(t testing.TB, st *records.Store, ids ...string) map[string]ssh.Signer {
	t.Helper()
	keys := map[string]ssh.Signer{}
	for _, id := range ids {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		keys[id] = addPartnerKey(t, st, id, priv)
	}
	return keys
}

// addPartnerKey creates partner id (if new) with the public half of priv as
// its key: Ed25519, or ECDSA for clients that know no Ed25519.
func addPartnerKey(t testing.TB, st *records.Store, id string, priv crypto.Signer) ssh.Signer {
	t.Helper()
	ctx := context.Background()
	if err := st.AddPartner(ctx, records.Partner{ID: id}); err != nil && !errors.Is(err, records.ErrExists) {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	k, err := intake.ParseAuthorizedKeys(id, ssh.MarshalAuthorizedKey(signer.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddPartnerKey(ctx, k[0]); err != nil {
		t.Fatal(err)
	}
	return signer
}

// client is one SFTP connection of a partner.
type client struct {
	*sftp.Client
	conn *ssh.Client
}

func (s *server) dial(user string, key ssh.Signer, opts ...sftp.ClientOption) (*client, error) {
	fp := s.hostKey
	cfg := &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(key)}, Timeout: 30 * time.Second,
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			if ssh.FingerprintSHA256(k) != fp {
				return errors.New("host key mismatch")
			}
			return nil
		}}
	conn, err := ssh.Dial("tcp", s.sftpAddr, cfg)
	if err != nil {
		return nil, err
	}
	c, err := sftp.NewClient(conn, opts...)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &client{c, conn}, nil
}

func (s *server) login(user string, key ssh.Signer, opts ...sftp.ClientOption) *client {
	s.t.Helper()
	c, err := s.dial(user, key, opts...)
	if err != nil {
		s.t.Fatalf("login as %s: %v", user, err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

func (c *client) Close() error {
	c.Client.Close()
	return c.conn.Close()
}

// upload writes data to /inbox/name and closes it (the moment of receipt).
func (c *client) upload(name string, data []byte) error {
	f, err := c.Create("/inbox/" + name)
	if err != nil {
		return err
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// result returns /results/NAME.result.csv, or an error if it is not there.
func (c *client) result(name string) ([]byte, error) {
	rn := records.ResultName(name)
	fi, err := c.Stat("/results/" + rn)
	if err != nil {
		return nil, err
	}
	f, err := c.Open("/results/" + rn)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		return nil, err
	}
	if int64(b.Len()) != fi.Size() {
		return nil, fmt.Errorf("%s: stat says %d bytes, read %d", rn, fi.Size(), b.Len())
	}
	return b.Bytes(), nil
}

// waitResult polls until the result of name is there.
func (c *client) waitResult(t testing.TB, name string, within time.Duration) []byte {
	t.Helper()
	var b []byte
	eventually.NoError(t, within, func() error {
		var err error
		b, err = c.result(name)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("result of %s: %v", name, err)
		}
		if err != nil {
			return fmt.Errorf("result of %s: %w", name, err)
		}
		return nil
	})
	return b
}

// payrollFile is a valid file of n rows with distinct natural keys.
func payrollFile(tag string, n int) []byte {
	var b bytes.Buffer
	b.WriteString("employee_ref,pay_period,component,amount,currency\n")
	for i := range n {
		fmt.Fprintf(&b, "%s%06d,2026-11,BASE,%d.%02d,USD\n", tag, i, 1000+i%5000, i%100)
	}
	return b.Bytes()
}

// ledger is the database's account of one partner's submissions.
type ledger struct {
	byStatus  map[string]int
	processed map[string]int // per submission key
	records   int
	versions  int // records with version > 1
	history   int
	results   int // envelopes with a stored result
}

func audit(t testing.TB, st *records.Store, partner string) ledger {
	t.Helper()
	ctx := context.Background()
	l := ledger{byStatus: map[string]int{}, processed: map[string]int{}}
	rows, err := st.Pool().Query(ctx, `SELECT status, submission_key FROM envelopes WHERE partner_id = $1`, partner)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var status, key string
		if err := rows.Scan(&status, &key); err != nil {
			t.Fatal(err)
		}
		l.byStatus[status]++
		if status == records.StatusProcessed {
			l.processed[key]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	q := func(sql string) int {
		var n int
		if err := st.Pool().QueryRow(ctx, sql, partner).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	l.records = q(`SELECT count(*) FROM records WHERE partner_id = $1`)
	l.versions = q(`SELECT count(*) FROM records WHERE partner_id = $1 AND version > 1`)
	l.history = q(`SELECT count(*) FROM record_history h JOIN records r ON r.id = h.record_id WHERE r.partner_id = $1`)
	l.results = q(`SELECT count(DISTINCT r.envelope_id) FROM envelope_results r JOIN envelopes e ON e.id = r.envelope_id WHERE e.partner_id = $1`)
	return l
}

// waitSettled waits until no envelope of partner is still waiting.
func waitSettled(t testing.TB, st *records.Store, partner string, within time.Duration) {
	t.Helper()
	eventually.NoError(t, within, func() error {
		var n int
		if err := st.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM envelopes WHERE partner_id = $1 AND status = 'received'`, partner).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return fmt.Errorf("partner %s: %d envelopes still waiting", partner, n)
		}
		return nil
	})
}

// resultRows checks a result file: the header, then one row per data row,
// every one with outcome want. It returns the number of rows.
func checkResult(t testing.TB, name string, res []byte, rows int, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(res), "\n"), "\n")
	if lines[0]+"\n" != records.ResultHeader {
		t.Fatalf("%s: result header %q", name, lines[0])
	}
	if len(lines)-1 != rows {
		t.Fatalf("%s: result has %d rows, want %d", name, len(lines)-1, rows)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, ","+want+",") {
			t.Fatalf("%s: row %q, want outcome %s", name, l, want)
		}
	}
}
