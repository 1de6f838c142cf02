package sftpd_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/internal/syncbuf"

	"github.com/jackc/pgx/v5"
	"github.com/pkg/sftp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"
	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/intaketest"
	"github.com/payintake/payintake/intake/sftpd"
	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// dropZone is a real SFTP drop zone on 127.0.0.1 with its own database,
// job queue and spool folder.
type dropZone struct {
	t       testing.TB
	ctx     context.Context
	url     string
	store   *records.Store
	srv     *sftpd.Server
	addr    string
	hostKey ssh.PublicKey
	spool   string
	logs    *syncbuf.Buffer
	reg     *prometheus.Registry
	queue   *intake.Queue
	// enqueued holds the envelope ids given a processing job, in order:
	// the signal that a worker will (or will never) see an envelope.
	enqueued *ids
	// stop ends the server as a replica's stop does: its listener and
	// every connection closed.
	stop func()
}

// ids is a list of envelope ids, safe for concurrent use.
type ids struct {
	mu  sync.Mutex
	ids []int64
}

func (l *ids) add(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
}

func (l *ids) list() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

// metric returns the value of one counter or gauge sample, labels as "k=v" pairs.
func (z *dropZone) metric(name string, labels ...string) float64 {
	z.t.Helper()
	mfs, err := z.reg.Gather()
	if err != nil {
		z.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

type zoneOpts struct {
	url         string // an existing database (another server's); empty: a new one
	workers     int    // -1: none (insert only)
	maxFileSize int64
	loginDelay  time.Duration
	resume      time.Duration // Config.ResumeWindow
	checkpoint  time.Duration // Config.Checkpoint
	idle        time.Duration // Config.IdleTimeout
	maxSessions int           // Config.MaxSessions
	tracing     trace.TracerProvider
	clock       *testClock    // Config.Now; nil: the real clock
	commit      time.Duration // records.Options.CommitTimeout
	// hostKeys: the server's; nil: testHostKeys. fromStore: the store's
	// (EnsureHostKeys), read again every 50ms.
	hostKeys  *sftpd.HostKeys
	fromStore bool
	legacy    bool     // Config.LegacyAlgorithms
	keyTypes  []string // Config.HostKeyTypes
	// proxies: the listener is wrapped (clientaddr.Proxies.Listener), as
	// serve always does; nil: a bare listener.
	proxies *clientaddr.Proxies
}

// testClock is the real clock plus a lead the test gives it (Advance), so
// a test can let time pass without waiting.
type testClock struct{ lead atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.lead.Load())) }
func (c *testClock) Advance(d time.Duration) { c.lead.Add(int64(d)) }

func newDropZone(t testing.TB, o zoneOpts) *dropZone {
	t.Helper()
	ctx := context.Background()
	url := o.url
	if url == "" {
		url = pgtest.New(t)
	}
	st, err := records.Open(ctx, url, records.Options{MaxConns: 20, TracerProvider: o.tracing, CommitTimeout: o.commit, SecretKeys: pgtest.TestSecretKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := intake.MigrateQueue(ctx, st.Pool()); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	in := intake.New(st, log)
	workers := o.workers
	if workers == 0 {
		workers = 4
	} else if workers < 0 {
		workers = 0
	}
	reg := prometheus.NewRegistry()
	m := intake.NewMetrics(reg)
	q, err := intake.NewQueue(in, m, intake.QueueConfig{Workers: workers, TestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hks, refresh := o.hostKeys, time.Duration(0)
	if o.fromStore {
		if hks, err = sftpd.EnsureHostKeys(ctx, st, log); err != nil {
			t.Fatal(err)
		}
		refresh = 50 * time.Millisecond
	} else if hks == nil {
		hks = testHostKeys(t)
	}
	spool := filepath.Join(t.TempDir(), "spool")
	enqueued := &ids{}
	enqueue := func(ctx context.Context, tx pgx.Tx, env records.Envelope) error {
		err := q.Enqueue(ctx, tx, env)
		if err == nil {
			enqueued.add(env.ID)
		}
		return err
	}
	srv, err := sftpd.New(sftpd.Config{
		Store: st, HostKeys: hks, HostKeyRefresh: refresh, LegacyAlgorithms: o.legacy, HostKeyTypes: o.keyTypes, SpoolDir: spool, MaxFileSize: o.maxFileSize,
		Intake: in, Auth: partnerauth.New(st, partnerauth.WithMetrics(reg)), Enqueue: enqueue, Log: log, LoginDelay: o.loginDelay, Metrics: sftpd.NewMetrics(reg), ResumeWindow: o.resume,
		Checkpoint:  o.checkpoint,
		IdleTimeout: o.idle, MaxSessions: o.maxSessions, Now: nowOf(o.clock),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if o.proxies != nil {
		ln = o.proxies.Listener(ln)
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		stop, c2 := context.WithTimeout(ctx, 10*time.Second)
		defer c2()
		if err := q.Stop(stop); err != nil {
			t.Errorf("stop queue: %v", err)
		}
	})
	return &dropZone{t: t, ctx: ctx, url: url, store: st, srv: srv, addr: addr, hostKey: activeKey(t, hks, ssh.KeyAlgoED25519), spool: spool, logs: logs, reg: reg, queue: q, enqueued: enqueued, stop: cancel}
}

func nowOf(c *testClock) func() time.Time {
	if c == nil {
		return nil
	}
	return c.Now
}

// partner adds a partner with one fresh key and returns the key.
func (z *dropZone) partner(id string) ssh.Signer {
	z.t.Helper()
	if err := z.store.AddPartner(z.ctx, records.Partner{ID: id}); err != nil && !errors.Is(err, records.ErrExists) {
		z.t.Fatal(err)
	}
	return z.addKey(id)
}

func (z *dropZone) addKey(id string) ssh.Signer {
	z.t.Helper()
	s := newKey(z.t)
	k, err := intake.ParseAuthorizedKeys(id, ssh.MarshalAuthorizedKey(s.PublicKey()))
	if err != nil {
		z.t.Fatal(err)
	}
	if err := z.store.AddPartnerKey(z.ctx, k[0]); err != nil {
		z.t.Fatal(err)
	}
	return s
}

func newKey(t testing.TB) ssh.Signer {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (z *dropZone) clientConfig(user string, key ssh.Signer) *ssh.ClientConfig {
	return &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(z.hostKey), HostKeyAlgorithms: []string{z.hostKey.Type()}, Timeout: 10 * time.Second}
}

// dial logs in over SSH as user, without a session; it fails the test if
// the login fails, and closes the connection when the test ends.
func (z *dropZone) dial(user string, key ssh.Signer) *ssh.Client {
	z.t.Helper()
	conn, err := ssh.Dial("tcp", z.addr, z.clientConfig(user, key))
	if err != nil {
		z.t.Fatalf("ssh login as %s: %v", user, err)
	}
	z.t.Cleanup(func() { conn.Close() })
	return conn
}

// login opens an SFTP session; it fails the test if the login fails.
func (z *dropZone) login(user string, key ssh.Signer) *sftp.Client {
	z.t.Helper()
	c, err := z.tryLogin(user, key)
	if err != nil {
		z.t.Fatalf("login as %s: %v", user, err)
	}
	return c
}

func (z *dropZone) tryLogin(user string, key ssh.Signer, opts ...sftp.ClientOption) (*sftp.Client, error) {
	conn, err := ssh.Dial("tcp", z.addr, z.clientConfig(user, key))
	if err != nil {
		return nil, err
	}
	c, err := sftp.NewClient(conn, opts...)
	if err != nil {
		conn.Close()
		return nil, err
	}
	z.t.Cleanup(func() { c.Close(); conn.Close() })
	return c, nil
}

func put(t testing.TB, c *sftp.Client, remote string, data []byte) {
	t.Helper()
	if err := tryPut(c, remote, data); err != nil {
		t.Fatalf("upload %s: %v", remote, err)
	}
}

func tryPut(c *sftp.Client, remote string, data []byte) error {
	f, err := c.Create(remote)
	if err != nil {
		return err
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// waitResult polls /results until name appears and returns its bytes.
func waitResult(t testing.TB, c *sftp.Client, name string) []byte {
	t.Helper()
	var fi os.FileInfo
	eventually.NoError(t, 30*time.Second, func() (err error) {
		if fi, err = c.Stat("/results/" + name); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat /results/%s: %v", name, err)
		}
		return err
	})
	f, err := c.Open("/results/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if int64(b.Len()) != fi.Size() {
		t.Fatalf("%s: stat says %d bytes, read %d", name, fi.Size(), b.Len())
	}
	return b.Bytes()
}

func (z *dropZone) count(q string, args ...any) int {
	z.t.Helper()
	return pgtest.Count(z.ctx, z.t, z.store, q, args...)
}

func (z *dropZone) statuses(partner string) []string {
	z.t.Helper()
	rows, err := z.store.Pool().Query(z.ctx, `SELECT status FROM envelopes WHERE partner_id = $1 ORDER BY id`, partner)
	if err != nil {
		z.t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		out = append(out, s)
	}
	return out
}

const payroll = "employee_ref,pay_period,component,amount,currency\n" +
	"E001,2026-11,BASE,4000.00,USD\n" +
	"E001,2026-11,OVERTIME,\"1,375.5\",USD\n" +
	"E002,2026-11,BASE,5200,usd\n"

func TestSFTPUploadThenDownloadResult(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	c := z.login("acme", key)

	put(t, c, "/inbox/payroll-2026-11.csv", []byte(payroll))
	// A client that checks the size after an upload finds it.
	if fi, err := c.Stat("/inbox/payroll-2026-11.csv"); err != nil || fi.Size() != int64(len(payroll)) {
		t.Fatalf("stat after upload: %v, %v", fi, err)
	}
	got := waitResult(t, c, "payroll-2026-11.result.csv")
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if lines[0] != strings.TrimSuffix(records.ResultHeader, "\n") {
		t.Fatalf("result header: %q", lines[0])
	}
	if len(lines) != 4 {
		t.Fatalf("result has %d lines, want 4:\n%s", len(lines), got)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, ",created,") {
			t.Errorf("row not created: %q", l)
		}
	}
	if !strings.Contains(string(got), "1375.50") {
		t.Errorf("amount not normalised in result:\n%s", got)
	}
	if n := z.count(`SELECT count(*) FROM records WHERE partner_id = 'acme'`); n != 3 {
		t.Fatalf("records: %d, want 3", n)
	}
	ents, err := c.ReadDir("/results")
	if err != nil || len(ents) != 1 || ents[0].Name() != "payroll-2026-11.result.csv" || ents[0].Size() != int64(len(got)) ||
		ents[0].ModTime().IsZero() {
		t.Fatalf("list /results: %v %v", ents, err)
	}
	root, err := c.ReadDir("/")
	if err != nil || len(root) != 2 || root[0].Name() != "inbox" || root[1].Name() != "results" || !root[0].IsDir() {
		t.Fatalf("list /: %v %v", root, err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"payintake_sftp_uploads_total", []string{"result=received"}, 1},
		{"payintake_sftp_upload_stored_total", []string{"how=streamed"}, 1},
		{"payintake_sftp_upload_stored_total", []string{"how=at_close"}, 0},
		{"payintake_sftp_upload_bytes_total", nil, float64(len(payroll))},
		{"payintake_envelopes_total", []string{"source=sftp", "outcome=processed"}, 1},
		{"payintake_rows_total", []string{"outcome=created"}, 3},
		{"payintake_envelope_processing_seconds", nil, 1},
		{"payintake_sftp_logins_total", []string{"result=ok"}, 1},
		{"payintake_sftp_connections", nil, 1},
		{"payintake_sftp_downloads_total", nil, 1},
	} {
		if got := z.metric(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Nothing left behind in the spool (removed once the closes are
	// answered).
	z.waitSpoolEmpty()
	// A second job for the same envelope (a rescue, a sweep) finds it done
	// and counts nothing again.
	var envID int64
	if err := z.store.Pool().QueryRow(z.ctx, `SELECT id FROM envelopes WHERE partner_id = 'acme'`).Scan(&envID); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(z.ctx, z.store.Pool(), func(tx pgx.Tx) error {
		return z.queue.Enqueue(z.ctx, tx, records.Envelope{ID: envID})
	}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, func() bool {
		completed := 0
		for _, j := range intaketest.ProcessJobs(z.t, z.store.Pool(), "") {
			if j.State == rivertype.JobStateCompleted {
				completed++
			}
		}
		return completed >= 2
	}, "the second job completed")
	if got := z.metric("payintake_rows_total", "outcome=created"); got != 3 {
		t.Errorf("rows counted again by a second job: %v, want 3", got)
	}
}

func TestSFTPSameFileTwiceAppliedOnce(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	c := z.login("acme", key)
	put(t, c, "/inbox/run7.csv", []byte(payroll))
	first := waitResult(t, c, "run7.result.csv")

	c2 := z.login("acme", key) // a retry from a new session, differently cased extension
	put(t, c2, "/inbox/run7.csv", []byte(payroll))
	again := waitResult(t, c2, "run7.result.csv")
	if !bytes.Equal(first, again) {
		t.Fatalf("second result differs:\n%s\n---\n%s", first, again)
	}
	if got := z.statuses("acme"); strings.Join(got, ",") != "processed,replay" {
		t.Fatalf("envelopes: %v", got)
	}
	if n := z.count(`SELECT count(*) FROM records WHERE partner_id = 'acme' AND version = 1`); n != 3 {
		t.Fatalf("records: %d", n)
	}
	if n := z.count(`SELECT count(*) FROM record_history`); n != 0 {
		t.Fatalf("history rows: %d (applied twice?)", n)
	}
	// Different bytes under the same name: rejected, the result says so.
	put(t, c2, "/inbox/run7.csv", []byte(payroll+"E003,2026-11,BASE,1,USD\n"))
	eventually.NoError(t, 10*time.Second, func() error {
		if b := waitResult(t, c2, "run7.result.csv"); !strings.Contains(string(b), "idempotency_key_reuse") {
			return fmt.Errorf("no key reuse result: %s", b)
		}
		return nil
	})
}

func TestSFTPConcurrentSameNameAppliedOnce(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	const sessions = 4
	clients := make([]*sftp.Client, sessions)
	files := make([]*sftp.File, sessions)
	for i := range clients {
		clients[i] = z.login("acme", key)
		f, err := clients[i].Create("/inbox/same.csv")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(payroll)); err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	// All closes at the same moment.
	var wg sync.WaitGroup
	errs := make([]error, sessions)
	for i, f := range files {
		wg.Go(func() { errs[i] = f.Close() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	var results [][]byte
	for _, c := range clients {
		results = append(results, waitResult(t, c, "same.result.csv"))
	}
	for _, r := range results[1:] {
		if !bytes.Equal(r, results[0]) {
			t.Fatal("sessions see different results")
		}
	}
	if n := z.count(`SELECT count(*) FROM records WHERE partner_id = 'acme'`); n != 3 {
		t.Fatalf("records: %d, want 3", n)
	}
	if n := z.count(`SELECT count(*) FROM envelopes WHERE status = 'processed'`); n != 1 {
		t.Fatalf("processed envelopes: %d, want 1", n)
	}
	if n := z.count(`SELECT count(*) FROM envelopes WHERE status = 'replay'`); n != sessions-1 {
		t.Fatalf("replays: %d, want %d", n, sessions-1)
	}
}

func TestSFTPTwoServersOneDatabase(t *testing.T) {
	t.Parallel()
	z1 := newDropZone(t, zoneOpts{})
	z2 := newDropZone(t, zoneOpts{url: z1.url})
	key := z1.partner("acme")
	c1, c2 := z1.login("acme", key), z2.login("acme", key)

	// The same file through both servers at the same moment.
	var files []*sftp.File
	for _, c := range []*sftp.Client{c1, c2} {
		f, err := c.Create("/inbox/both.csv")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(payroll)); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Go(func() {
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	r1, r2 := waitResult(t, c1, "both.result.csv"), waitResult(t, c2, "both.result.csv")
	if !bytes.Equal(r1, r2) {
		t.Fatal("the two servers show different results")
	}
	// A file sent to one server is listed by the other.
	put(t, c1, "/inbox/one.csv", []byte(strings.ReplaceAll(payroll, "2026-11", "2026-12")))
	waitResult(t, c2, "one.result.csv")
	l1, err1 := c1.ReadDir("/results")
	l2, err2 := c2.ReadDir("/results")
	if err1 != nil || err2 != nil || len(l1) != 2 || len(l2) != 2 || l1[0].Size() != l2[0].Size() || l1[1].Name() != l2[1].Name() {
		t.Fatalf("listings differ: %v %v / %v %v", l1, err1, l2, err2)
	}
	if n := z1.count(`SELECT count(*) FROM records`); n != 6 {
		t.Fatalf("records: %d, want 6", n)
	}
	if got := z1.statuses("acme"); strings.Join(got, ",") != "processed,replay,processed" && strings.Join(got, ",") != "replay,processed,processed" {
		t.Fatalf("envelopes: %v", got)
	}
	// One job per new envelope, each completed at its first attempt (River
	// records completions in batches, so wait for them).
	eventually.NoError(t, 10*time.Second, func() error {
		jobs := intaketest.ProcessJobs(t, z1.store.Pool(), "")
		done := 0
		for _, j := range jobs {
			if j.State == rivertype.JobStateCompleted && j.Attempt == 1 {
				done++
			}
		}
		if done != 2 || len(jobs) != 2 {
			return fmt.Errorf("jobs: %d completed at the first attempt, %d in all; want 2 and 2", done, len(jobs))
		}
		return nil
	})
}

func TestSFTPUploadCutOffIsNeverProcessed(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	tcp, err := net.Dial("tcp", z.addr)
	if err != nil {
		t.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(tcp, z.addr, z.clientConfig("acme", key))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sftp.NewClient(ssh.NewClient(sc, chans, reqs))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Create("/inbox/cut.csv")
	if err != nil {
		t.Fatal(err)
	}
	// Half the file arrives, then the connection drops: no close.
	big := bytes.Repeat([]byte(payroll), 2000)
	if _, err := f.Write(big[:len(big)/2]); err != nil {
		t.Fatal(err)
	}
	tcp.Close()

	eventually.True(t, 10*time.Second, func() bool { return z.count(`SELECT count(*) FROM envelopes`) > 0 },
		"the cut-off upload recorded")
	// No worker will ever see it: it was given no processing job (jobs are
	// enqueued in the envelope's own transaction, so this is final).
	var cutID, size int64
	var status string
	if err := z.store.Pool().QueryRow(z.ctx, `SELECT id, status, size FROM envelopes`).Scan(&cutID, &status, &size); err != nil {
		t.Fatal(err)
	}
	if status != records.StatusIncomplete || size != int64(len(big)/2) {
		t.Fatalf("envelope %s with %d bytes, want incomplete with %d", status, size, len(big)/2)
	}
	if got := z.enqueued.list(); len(got) != 0 {
		t.Fatalf("the cut-off upload was given processing jobs for envelopes %v", got)
	}
	if n := z.count(`SELECT count(*) FROM records`) + z.count(`SELECT count(*) FROM submissions`) +
		z.count(`SELECT count(*) FROM envelope_results`); n != 0 {
		t.Fatalf("a cut-off upload left %d records/submissions/results", n)
	}
	c2 := z.login("acme", key)
	if ents, err := c2.ReadDir("/results"); err != nil || len(ents) != 0 {
		t.Fatalf("results after a cut-off upload: %v %v", ents, err)
	}
	// The same name sent whole afterwards is received normally.
	put(t, c2, "/inbox/cut.csv", []byte(payroll))
	waitResult(t, c2, "cut.result.csv")
	// The workers ran meanwhile: the whole file's job, never one for the cut one.
	if got := z.enqueued.list(); len(got) != 1 || got[0] == cutID {
		t.Fatalf("processing jobs for envelopes %v, want one for the whole file (the cut one is %d)", got, cutID)
	}
	if z.count(`SELECT count(*) FROM envelopes WHERE id = $1 AND status = 'incomplete'`, cutID) != 1 {
		t.Fatal("the cut-off upload's envelope changed status")
	}
	z.waitSpoolEmpty()
}

// waitSpoolEmpty waits until the zone's spool holds no file (an upload's is
// removed once its close is answered).
func (z *dropZone) waitSpoolEmpty() {
	z.t.Helper()
	eventually.NoError(z.t, 10*time.Second, func() error {
		if left, _ := os.ReadDir(z.spool); len(left) != 0 {
			return fmt.Errorf("spool not empty: %v", left)
		}
		return nil
	})
}

func TestSFTPTempNameThenRename(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{resume: 5 * time.Second})
	key := z.partner("acme")
	c := z.login("acme", key)
	for _, tmp := range []string{"a.csv.filepart", "b.csv.part", ".c.csv", "d.tmp"} {
		put(t, c, "/inbox/"+tmp, []byte(payroll))
	}
	// Another connection of the partner sees them (clients with pooled
	// connections rename or stat on another one).
	if fi, err := z.login("acme", key).Stat("/inbox/d.tmp"); err != nil || fi.Size() != int64(len(payroll)) {
		t.Fatalf("stat of a waiting temp file from another connection: %v %v", fi, err)
	}
	ents, err := c.ReadDir("/inbox")
	if err != nil || len(ents) != 4 {
		t.Fatalf("inbox lists the waiting temp files: %v %v", ents, err)
	}
	// A file is received (its envelope recorded) before its close is
	// answered, so had a temp name been received, it would show by now.
	if n := z.count(`SELECT count(*) FROM envelopes`); n != 0 {
		t.Fatalf("temp names were received: %d envelopes", n)
	}
	// WinSCP style: rename; OpenSSH style: posix-rename.
	if err := c.Rename("/inbox/a.csv.filepart", "/inbox/a.csv"); err != nil {
		t.Fatal(err)
	}
	if err := c.PosixRename("/inbox/b.csv.part", "/inbox/b.csv"); err != nil {
		t.Fatal(err)
	}
	// A temp file can be removed (a cancelled transfer).
	if err := c.Remove("/inbox/.c.csv"); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat("/inbox/a.csv"); err != nil || fi.Size() != int64(len(payroll)) {
		t.Fatalf("stat renamed file: %v %v", fi, err)
	}
	waitResult(t, c, "a.result.csv")
	waitResult(t, c, "b.result.csv")
	// A received file can be neither renamed nor removed.
	if err := c.Rename("/inbox/a.csv", "/inbox/z.csv"); err == nil {
		t.Fatal("renamed a received file")
	}
	if err := c.Remove("/inbox/a.csv"); err == nil {
		t.Fatal("removed a received file")
	}
	c.Close()
	// d.tmp was never renamed: discarded once the resume window has passed.
	eventually.NoError(t, 15*time.Second, func() error {
		if left, _ := os.ReadDir(z.spool); len(left) > 0 {
			return fmt.Errorf("spool keeps %v after the resume window", left)
		}
		return nil
	})
	if got := z.statuses("acme"); len(got) != 2 {
		t.Fatalf("envelopes: %v, want a.csv and b.csv only", got)
	}
}

func TestSFTPReviewReportInResults(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	c := z.login("acme", key)
	put(t, c, "/inbox/jan.csv", []byte(payroll))
	waitResult(t, c, "jan.result.csv")
	if _, err := z.store.LockPeriod(z.ctx, "acme", "2026-11", "approved", "lead"); err != nil {
		t.Fatal(err)
	}
	put(t, c, "/inbox/jan-fix.csv", []byte(strings.Replace(payroll, "4000.00", "4100.00", 1)))
	if res := waitResult(t, c, "jan-fix.result.csv"); !strings.Contains(string(res), ",held,") {
		t.Fatalf("no held row:\n%s", res)
	}
	if _, err := c.Stat("/results/jan-fix.review.csv"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a review report before any decision: %v", err)
	}
	xs, err := z.store.Exceptions(z.ctx, records.ExceptionFilter{Partner: "acme", Status: "open"})
	if err != nil || len(xs) != 1 {
		t.Fatalf("exceptions: %v %v", xs, err)
	}
	if _, err := z.store.Decide(z.ctx, records.Decision{ExceptionID: xs[0].ID, Approve: true, Reviewer: "alice"}); err != nil {
		t.Fatal(err)
	}
	got := waitResult(t, c, "jan-fix.review.csv")
	var want bytes.Buffer
	if err := z.store.ReviewReport(z.ctx, xs[0].EnvelopeID, &want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) || !strings.Contains(string(got), ",approved,") {
		t.Fatalf("review report:\n%s\nwant:\n%s", got, want.Bytes())
	}
	ents, err := c.ReadDir("/results")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "jan-fix.result.csv jan.result.csv jan-fix.review.csv" {
		t.Fatalf("/results lists %v", names)
	}
}

func TestSFTPEmptyFileGetsResult(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	c := z.login("acme", key)
	put(t, c, "/inbox/empty.csv", nil)
	got := waitResult(t, c, "empty.result.csv")
	if !strings.Contains(string(got), "empty_file") {
		t.Fatalf("result of an empty file: %s", got)
	}
}

// The longest upload name gives a result name longer than an upload may
// have; it is listed and can be downloaded all the same.
func TestSFTPLongNameResultIsReadable(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	c := z.login("acme", key)
	stem := strings.Repeat("p", 255-len(".csv")) // the longest upload name, 255 bytes
	put(t, c, "/inbox/"+stem+".csv", []byte("employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,1.00,USD\n"))
	got := waitResult(t, c, stem+".result.csv")
	if !strings.Contains(string(got), ",created,") {
		t.Fatalf("result: %s", got)
	}
}

func TestSFTPOutOfOrderAndConcurrentWrites(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{workers: -1})
	key := z.partner("acme")
	c, err := z.tryLogin("acme", key, sftp.UseConcurrentWrites(true), sftp.MaxConcurrentRequestsPerFile(64))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<20+123)
	_, _ = rand.Read(data)
	put(t, c, "/inbox/concurrent.bin", data)

	// Blocks written backwards, by hand.
	f, err := c.Create("/inbox/backwards.bin")
	if err != nil {
		t.Fatal(err)
	}
	const blk = 10000
	for off := (len(data) - 1) / blk * blk; off >= 0; off -= blk {
		if _, err := f.WriteAt(data[off:min(off+blk, len(data))], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Each pair of blocks swapped: every second block waits for the one
	// before it, and the memory that held it holds later ones.
	f, err = c.Create("/inbox/swapped.bin")
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 2 * blk {
		for _, o := range []int{off + blk, off} {
			if o < len(data) {
				if _, err := f.WriteAt(data[o:min(o+blk, len(data))], int64(o)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"concurrent.bin", "backwards.bin", "swapped.bin"} {
		var id int64
		if err := z.store.Pool().QueryRow(z.ctx, `SELECT id FROM envelopes WHERE file_name = $1`, name).Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored, err := io.ReadAll(z.store.EnvelopeBytes(z.ctx, id))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stored, data) {
			t.Fatalf("%s: stored %d bytes differ from the %d sent", name, len(stored), len(data))
		}
	}
}

func TestSFTPMaxFileSize(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{maxFileSize: 4096})
	key := z.partner("acme")
	c := z.login("acme", key)
	err := tryPut(c, "/inbox/huge.csv", bytes.Repeat([]byte("x"), 10000))
	if err == nil || !strings.Contains(err.Error(), "larger than the limit of 4 KiB") {
		t.Fatalf("oversize upload: %v", err)
	}
	// The session still works, and a small file goes through.
	put(t, c, "/inbox/small.csv", []byte(payroll))
	waitResult(t, c, "small.result.csv")
	if got := z.statuses("acme"); strings.Join(got, ",") != "incomplete,processed" {
		t.Fatalf("envelopes: %v", got)
	}
	if _, err := c.Stat("/results/huge.result.csv"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an oversize upload has a result: %v", err)
	}
}

func TestSFTPPartnerIsolationAndPathEscapes(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	acmeKey := z.partner("acme")
	otherKey := z.partner("other")
	acme := z.login("acme", acmeKey)
	other := z.login("other", otherKey)
	put(t, acme, "/inbox/secret.csv", []byte(payroll))
	waitResult(t, acme, "secret.result.csv")

	// A canary outside the view that nothing may touch.
	canaryDir := t.TempDir()
	canary := filepath.Join(canaryDir, "canary.txt")
	if err := os.WriteFile(canary, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	rel, _ := filepath.Rel("/", canary)
	up := strings.Repeat("../", 12)

	reads := []string{
		"/etc/passwd", up + "etc/passwd", "/inbox/" + up + "etc/passwd", `\..\..\etc\passwd`,
		`/results/..\..\..\etc\passwd`, "/" + rel, up + rel, "/inbox/secret.csv",
		"/results/../../acme/results/secret.result.csv", "/acme/results/secret.result.csv",
		"/results/secret.result.csv", "/results/SECRET.result.csv", "/results/" + strings.Repeat("a", 300),
		"/results/x\x00.csv", "/inbox", "/results", "/",
	}
	for _, p := range reads {
		if f, err := other.Open(p); err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("other partner read %q: %.40q", p, b)
		}
	}
	if ents, err := other.ReadDir("/results"); err != nil || len(ents) != 0 {
		t.Errorf("other partner sees results %v (%v)", ents, err)
	}
	for _, p := range []string{"/etc", up + "etc", "/inbox/../..", canaryDir, "/results/secret.result.csv"} {
		if ents, err := other.ReadDir(p); err == nil && len(ents) > 0 && ents[0].Name() != "inbox" {
			t.Errorf("listed %q: %v", p, ents)
		}
	}

	writes := []string{
		"/etc/passwd", up + "tmp/evil.csv", "/inbox/" + up + "tmp/evil.csv", `/inbox/..\..\evil.csv`,
		`\inbox\evil.csv`, "/" + rel, up + rel, "/results/secret.result.csv", "/results/new.csv",
		"/inbox/sub/evil.csv", "/evil.csv", "/inbox/" + strings.Repeat("a", 256), "/inbox/bad\nname.csv",
		"/inbox/bad\x01name.csv", "/inbox/ spaced.csv", "/inbox/rtl\u202ename.csv", "/other/inbox/x.csv",
	}
	for _, p := range writes {
		if err := tryPut(other, p, []byte("evil")); err == nil {
			t.Errorf("wrote %q", p)
		}
	}
	if err := other.Symlink("/etc/passwd", "/inbox/link.csv"); err == nil {
		t.Error("made a symlink")
	}
	if err := other.Symlink(canary, "/results/link"); err == nil {
		t.Error("made a symlink in results")
	}
	if err := other.Link("/results/secret.result.csv", "/inbox/x.csv"); err == nil {
		t.Error("made a hard link")
	}
	if _, err := other.ReadLink("/inbox/link.csv"); err == nil {
		t.Error("read a link")
	}
	for _, p := range []string{"/inbox/sub", "/tmp/x", up + "tmp/x", "/results/x"} {
		if err := other.Mkdir(p); err == nil {
			t.Errorf("mkdir %q", p)
		}
	}
	for _, p := range []string{"/etc/passwd", canary, "/results/secret.result.csv", "/inbox", "/results"} {
		if err := other.Remove(p); err == nil {
			t.Errorf("removed %q", p)
		}
		if err := other.Chmod(p, 0o777); err == nil && !strings.HasPrefix(p, "/inbox") {
			t.Errorf("chmod %q", p)
		}
	}
	// Renames across folders and partners.
	put(t, other, "/inbox/mine.csv.part", []byte(payroll))
	for _, to := range []string{"/results/mine.csv", "/acme/inbox/mine.csv", up + "tmp/mine.csv", "/etc/mine.csv",
		`/inbox/..\mine.csv`, "/inbox/" + strings.Repeat("m", 300)} {
		if err := other.Rename("/inbox/mine.csv.part", to); err == nil {
			t.Errorf("renamed to %q", to)
		}
	}
	if err := other.Rename("/results/secret.result.csv", "/inbox/stolen.csv"); err == nil {
		t.Error("renamed another partner's result")
	}
	if err := other.Rename(up+"etc/passwd", "/inbox/passwd.csv"); err == nil {
		t.Error("renamed /etc/passwd into the inbox")
	}

	// Nothing outside changed; the other partner has no envelopes and acme's are intact.
	if b, _ := os.ReadFile(canary); string(b) != "untouched" {
		t.Error("canary changed")
	}
	if b, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(b, passwd) {
		t.Error("/etc/passwd changed")
	}
	if got := z.statuses("other"); len(got) != 0 {
		t.Errorf("other partner's attempts became envelopes: %v", got)
	}
	if got := z.statuses("acme"); len(got) != 1 {
		t.Errorf("acme's envelopes: %v", got)
	}
	if _, err := os.Stat("/tmp/evil.csv"); err == nil {
		t.Error("/tmp/evil.csv exists")
	}
	if ents, err := acme.ReadDir("/results"); err != nil || len(ents) != 1 {
		t.Errorf("acme's results: %v %v", ents, err)
	}
	if rp, err := other.RealPath(up); err != nil || rp != "/" {
		t.Errorf("realpath of %q: %q %v", up, rp, err)
	}
}

func TestSFTPWrongKeyRefusedAndSlowedDown(t *testing.T) {
	t.Parallel()
	const delay = 100 * time.Millisecond
	z := newDropZone(t, zoneOpts{loginDelay: delay})
	key := z.partner("acme")
	z.partner("other")
	stranger := newKey(t)

	attempts := []struct {
		user string
		key  ssh.Signer
	}{{"acme", stranger}, {"nobody", stranger}, {"other", key}, {"nobody", key}}
	var last time.Duration
	for i, a := range attempts {
		start := time.Now()
		if _, err := z.tryLogin(a.user, a.key); err == nil {
			t.Fatalf("login as %s with a key not registered for it succeeded", a.user)
		}
		last = time.Since(start)
		if want := delay << i; last < want {
			t.Errorf("failed attempt %d took %v, want at least %v", i+1, last, want)
		}
	}
	if !strings.Contains(z.logs.String(), "login failed") {
		t.Error("failed logins are not logged")
	}
	// The right key still works and resets the delay.
	z.login("acme", key)
	if _, err := z.tryLogin("acme", stranger); err == nil {
		t.Fatal("stranger logged in")
	}
	start := time.Now()
	z.login("acme", key)
	if d := time.Since(start); d > delay {
		t.Errorf("login after a success still delayed: %v", d)
	}
	if got := z.metric("payintake_sftp_logins_total", "result=failed"); got != 5 {
		t.Errorf("failed logins counted: %v, want 5", got)
	}
}

func TestSFTPKeysAddedAndRevokedWithoutRestart(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{loginDelay: time.Millisecond})
	oldKey := z.partner("acme")
	c := z.login("acme", oldKey)
	newKey := z.addKey("acme") // rotation: both work
	z.login("acme", newKey)
	if err := z.store.RevokePartnerKey(z.ctx, "acme", ssh.FingerprintSHA256(oldKey.PublicKey())); err != nil {
		t.Fatal(err)
	}
	if _, err := z.tryLogin("acme", oldKey); err == nil {
		t.Fatal("revoked key still logs in")
	}
	z.login("acme", newKey)
	// A session opened before the revocation keeps working until it ends.
	if _, err := c.ReadDir("/inbox"); err != nil {
		t.Fatal(err)
	}
}

func TestSFTPNoShell(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	conn := z.dial("acme", z.partner("acme"))
	s, err := conn.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out, err := s.CombinedOutput("cat /etc/passwd"); err == nil || bytes.Contains(out, []byte("root:")) {
		t.Fatalf("exec worked: %q %v", out, err)
	}
	if _, _, err := conn.OpenChannel("direct-tcpip", nil); err == nil {
		t.Fatal("port forwarding channel accepted")
	}
}

// An SFTP session ends the way OpenSSH's server ends one: exit status 0,
// then the channel's close, so a client that waits for the session (ssh
// -s sftp, scripts that check the status) sees a clean end, not a channel
// closed without a status.
func TestSFTPSessionEndsWithExitStatus(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	conn := z.dial("acme", z.partner("acme"))
	ch, reqs, err := conn.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"})); err != nil || !ok {
		t.Fatalf("sftp subsystem: %v %v", ok, err)
	}
	c, err := sftp.NewClientPipe(ch, ch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadDir("/inbox"); err != nil {
		t.Fatal(err)
	}
	// The client's end of the session: EOF, as OpenSSH's sftp sends when
	// its batch is done.
	if err := ch.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// A server that never closes the channel fails the test, not the run.
	stop := time.AfterFunc(10*time.Second, func() { conn.Close() })
	defer stop.Stop()
	var got []string
	for req := range reqs { // until the server closes the channel
		var status struct{ Status uint32 }
		if req.Type == "exit-status" && ssh.Unmarshal(req.Payload, &status) == nil {
			got = append(got, fmt.Sprintf("exit-status %d", status.Status))
		} else {
			got = append(got, req.Type)
		}
	}
	if !slices.Equal(got, []string{"exit-status 0"}) {
		t.Fatalf("before closing the session the server sent %q; want exit-status 0", got)
	}
}

func ExampleResultName() {
	fmt.Println(records.ResultName("payroll-2026-11.csv"), records.ResultName("run.2026.txt"), records.ResultName("noext"))
	// Output: payroll-2026-11.result.csv run.2026.result.csv noext.result.csv
}
