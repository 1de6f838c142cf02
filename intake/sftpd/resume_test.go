package sftpd_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/internal/eventually"
)

// bigPayroll is a payroll file of about 600 KB, so that halves span many writes.
var bigPayroll = []byte(strings.Repeat(payroll, 4000))

// envelopeOf returns the bytes stored for the partner's only received
// envelope of name, and checks there is exactly one.
func (z *dropZone) envelopeOf(partner, name string) []byte {
	z.t.Helper()
	rows, err := z.store.Pool().Query(z.ctx, `SELECT id, sha256, size FROM envelopes
		WHERE partner_id = $1 AND file_name = $2 AND status <> 'incomplete'`, partner, name)
	if err != nil {
		z.t.Fatal(err)
	}
	type env struct {
		id   int64
		sum  []byte
		size int64
	}
	var envs []env
	for rows.Next() {
		var e env
		if err := rows.Scan(&e.id, &e.sum, &e.size); err != nil {
			z.t.Fatal(err)
		}
		envs = append(envs, e)
	}
	if len(envs) != 1 {
		z.t.Fatalf("%s: %d envelopes, want 1", name, len(envs))
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(z.store.EnvelopeBytes(z.ctx, envs[0].id)); err != nil {
		z.t.Fatal(err)
	}
	if sum := sha256.Sum256(b.Bytes()); !bytes.Equal(sum[:], envs[0].sum) || int64(b.Len()) != envs[0].size {
		z.t.Fatalf("%s: envelope's sha256/size %x/%d do not match its bytes", name, envs[0].sum, envs[0].size)
	}
	return b.Bytes()
}

// cutClient logs in on a TCP connection the test can cut.
func (z *dropZone) cutClient(user string, key ssh.Signer) (*sftp.Client, net.Conn) {
	z.t.Helper()
	tcp, err := net.Dial("tcp", z.addr)
	if err != nil {
		z.t.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(tcp, z.addr, z.clientConfig(user, key))
	if err != nil {
		z.t.Fatal(err)
	}
	c, err := sftp.NewClient(ssh.NewClient(sc, chans, reqs))
	if err != nil {
		z.t.Fatal(err)
	}
	return c, tcp
}

func writeAt(t *testing.T, c *sftp.Client, name string, flags int, data []byte, off int64) error {
	t.Helper()
	f, err := c.OpenFile(name, flags)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Resume within one session, as OpenSSH `put` to a .filepart then `reput`
// and rename do: one envelope holding exactly the file.
func TestSFTPResumeWithinSession(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{workers: -1})
	key := z.partner("acme")
	c := z.login("acme", key)
	half := len(bigPayroll) / 2
	put(t, c, "/inbox/X.csv.filepart", bigPayroll[:half])
	if fi, err := c.Stat("/inbox/X.csv.filepart"); err != nil || fi.Size() != int64(half) {
		t.Fatalf("stat after half: %v %v", fi, err)
	}
	// reput: open without truncation, write from the remote size.
	if err := writeAt(t, c, "/inbox/X.csv.filepart", os.O_WRONLY|os.O_CREATE, bigPayroll[half:], int64(half)); err != nil {
		t.Fatal(err)
	}
	if err := c.PosixRename("/inbox/X.csv.filepart", "/inbox/X.csv"); err != nil {
		t.Fatal(err)
	}
	if got := z.envelopeOf("acme", "X.csv"); !bytes.Equal(got, bigPayroll) {
		t.Fatalf("stored %d bytes, want the %d sent", len(got), len(bigPayroll))
	}
	// The correct file sent again afterwards is a replay, not a key reuse.
	put(t, c, "/inbox/X.csv", bigPayroll)
	if got := z.statuses("acme"); strings.Join(got, ",") != "received,replay" {
		t.Fatalf("envelopes: %v", got)
	}
	// The temp-named, resumed file was stored from the spool at its rename;
	// the one sent in one go was streamed while it arrived.
	if at, st := z.metric("payintake_sftp_upload_stored_total", "how=at_close"),
		z.metric("payintake_sftp_upload_stored_total", "how=streamed"); at != 1 || st != 1 {
		t.Fatalf("stored at close %v, streamed %v; want 1 and 1", at, st)
	}
}

// Resume after a cut connection, as paramiko open(..., 'ab') and curl -C -
// do (APPEND at the remote size), from a new connection.
func TestSFTPResumeAfterCutWithAppend(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{workers: -1})
	key := z.partner("acme")
	c1, tcp := z.cutClient("acme", key)
	f, err := c1.Create("/inbox/cut.csv")
	if err != nil {
		t.Fatal(err)
	}
	half := len(bigPayroll) / 2
	if _, err := f.Write(bigPayroll[:half]); err != nil {
		t.Fatal(err)
	}
	tcp.Close()

	c2 := z.login("acme", key)
	var size int64
	eventually.NoError(t, 10*time.Second, func() error {
		fi, err := c2.Stat("/inbox/cut.csv")
		if err != nil || fi.Size() != int64(half) {
			return fmt.Errorf("stat of the cut-off upload from a new connection: %v %v", fi, err)
		}
		size = fi.Size()
		return nil
	})
	// An append handle cannot rewrite the start.
	if err := writeAt(t, c2, "/inbox/cut.csv", os.O_WRONLY|os.O_APPEND, bigPayroll[:10], 0); err == nil ||
		!strings.Contains(err.Error(), "append") {
		t.Fatalf("append write at offset 0: %v", err)
	}
	// Nor can a resume change bytes already there.
	if err := writeAt(t, c2, "/inbox/cut.csv", os.O_WRONLY, []byte("XXXX"), 5); err == nil ||
		!strings.Contains(err.Error(), "change bytes already uploaded") {
		t.Fatalf("rewrite of uploaded bytes: %v", err)
	}
	// Repeating identical bytes is fine; the rest appended completes the file.
	if err := writeAt(t, c2, "/inbox/cut.csv", os.O_WRONLY|os.O_APPEND|os.O_CREATE, bigPayroll[size-100:], size-100); err == nil {
		t.Fatal("an append handle took a write below the size")
	}
	if err := writeAt(t, c2, "/inbox/cut.csv", os.O_WRONLY|os.O_APPEND|os.O_CREATE, bigPayroll[size:], size); err != nil {
		t.Fatal(err)
	}
	if got := z.envelopeOf("acme", "cut.csv"); !bytes.Equal(got, bigPayroll) {
		t.Fatalf("stored %d bytes, want the %d sent", len(got), len(bigPayroll))
	}
	// The received file is visible, and immutable, from any connection.
	c3 := z.login("acme", key)
	fi, err := c3.Stat("/inbox/cut.csv")
	if err != nil || fi.Size() != int64(len(bigPayroll)) {
		t.Fatalf("stat of the received file: %v %v", fi, err)
	}
	if err := writeAt(t, c3, "/inbox/cut.csv", os.O_WRONLY|os.O_APPEND, []byte("more\n"), int64(len(bigPayroll))); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("append to a received file: %v", err)
	}
	if _, err := c3.Open("/inbox/cut.csv"); err == nil {
		t.Fatal("a received file was opened for reading")
	}
}

func TestSFTPOpenFlagsAndReceivedFilesAcrossConnections(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{workers: -1})
	key := z.partner("acme")
	c := z.login("acme", key)
	// Without CREAT a missing file is not there.
	if err := writeAt(t, c, "/inbox/none.csv", os.O_WRONLY, []byte("x"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open without create: %v", err)
	}
	// Relative names land in /inbox, the login directory.
	put(t, c, "plain.csv", []byte(payroll))
	if wd, err := c.Getwd(); err != nil || wd != "/inbox" {
		t.Fatalf("login directory %q %v", wd, err)
	}
	// EXCL on an existing name is refused.
	if err := writeAt(t, c, "/inbox/plain.csv", os.O_WRONLY|os.O_CREATE|os.O_EXCL, []byte("x"), 0); err == nil ||
		!strings.Contains(err.Error(), "already exists") {
		t.Fatalf("exclusive create of a received name: %v", err)
	}
	// Another connection stats, lists and sets the time of the received file.
	c2 := z.login("acme", key)
	mtime := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	if err := c2.Chtimes("/inbox/plain.csv", mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := c2.Chtimes("/inbox/never.csv", mtime, mtime); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("setstat of a missing file: %v", err)
	}
	for _, stat := range []func(string) (os.FileInfo, error){c2.Stat, c2.Lstat} {
		fi, err := stat("/inbox/plain.csv")
		if err != nil || fi.Size() != int64(len(payroll)) || !fi.ModTime().Equal(mtime) {
			t.Fatalf("stat from another connection: %v %v", fi, err)
		}
	}
	ents, err := c2.ReadDir("/inbox")
	if err != nil || len(ents) != 1 || ents[0].Name() != "plain.csv" || ents[0].Size() != int64(len(payroll)) {
		t.Fatalf("listing: %v %v", ents, err)
	}
	if err := c2.Remove("/inbox/plain.csv"); err == nil {
		t.Fatal("removed a received file")
	}
}

// A write far past the end of an upload is refused: no sparse 1 GiB file
// from one byte.
func TestHostileSFTPSparseWrite(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{workers: -1})
	key := z.partner("acme")
	c := z.login("acme", key)
	f, err := c.Create("/inbox/sparse.csv")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte("x"), 1<<30-1)
	if err == nil || !strings.Contains(err.Error(), "hole") {
		t.Fatalf("write at 1 GiB-1: %v", err)
	}
	_ = f.Close()
	var spooled int64
	ents, _ := os.ReadDir(z.spool)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			spooled += fi.Size()
		}
	}
	t.Logf("write of 1 byte at offset 1 GiB-1: refused (%q); spool holds %d bytes", err, spooled)
	if spooled != 0 {
		t.Fatalf("spool holds %d bytes", spooled)
	}
	if n := z.count(`SELECT count(*) FROM envelopes WHERE status <> 'incomplete'`); n != 0 {
		t.Fatalf("%d envelopes received", n)
	}
}

// Malformed user names are unknown partners: refused after the login delay,
// counted as failed logins, never reported as a database outage.
func TestHostileSFTPBadUserNames(t *testing.T) {
	t.Parallel()
	const delay = 10 * time.Millisecond
	z := newDropZone(t, zoneOpts{loginDelay: delay})
	key := z.partner("acme")
	names := []string{"\xff\xfe", "acme\xc3", "a\x00cme", "ACME", "../acme", strings.Repeat("a", 5000), "acme\n", "", "acmé"}
	var slowest, fastest time.Duration
	for i, name := range names {
		start := time.Now()
		_, err := z.tryLogin(name, key)
		if err == nil {
			t.Fatalf("login as %q succeeded", name)
		}
		d := time.Since(start)
		if d < delay {
			t.Errorf("login as %q refused after %v, before the login delay %v", name, d, delay)
		}
		if i == 0 || d > slowest {
			slowest = d
		}
		if i == 0 || d < fastest {
			fastest = d
		}
	}
	// The server counts a failure just after the client has seen it.
	eventually.True(t, 10*time.Second, func() bool {
		return z.metric("payintake_sftp_logins_total", "result=failed") >= float64(len(names))
	}, "fewer than %d failed logins counted", len(names))
	unavailable := z.metric("payintake_sftp_logins_total", "result=unavailable")
	failed := z.metric("payintake_sftp_logins_total", "result=failed")
	t.Logf("%d malformed user names: %v failed logins, %v unavailable, refused after %v to %v",
		len(names), failed, unavailable, fastest.Round(time.Millisecond), slowest.Round(time.Millisecond))
	if unavailable != 0 || int(failed) != len(names) {
		t.Fatalf("metrics: %v unavailable, %v failed; want 0 and %d", unavailable, failed, len(names))
	}
	if logs := z.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Fatalf("malformed names logged as errors:\n%s", logs)
	}
}

// One partner cannot hold more than MaxSessions connections, and connections
// with no traffic are closed after IdleTimeout; a connection uploading
// slowly stays.
func TestHostileSFTPIdleAndExcessSessions(t *testing.T) {
	t.Parallel()
	const idle, maxSessions = 400 * time.Millisecond, 5
	z := newDropZone(t, zoneOpts{idle: idle, maxSessions: maxSessions, workers: -1})
	key := z.partner("acme")
	otherKey := z.partner("other")
	// A slow upload, on one of acme's sessions: a write every idle/4, for
	// as long as the logins below take and at least 3 idle periods.
	slow := z.login("acme", key)
	f, err := slow.Create("/inbox/slow.csv")
	if err != nil {
		t.Fatal(err)
	}
	data := genPayroll("SL", 120)
	stop := make(chan struct{})
	uploaded := make(chan error, 1)
	start := time.Now()
	go func() {
		// 16 bytes a tick last 200 ticks; the upload ends after at least 12
		// ticks and once the test says stop.
		off, stopped := 0, false
		for i := 0; ; i++ {
			select {
			case <-stop:
				stopped = true
			default:
			}
			if stopped && i >= 12 || off+16 >= len(data) {
				_, err := f.Write(data[off:])
				if err == nil {
					err = f.Close()
				}
				uploaded <- err
				return
			}
			if _, err := f.Write(data[off : off+16]); err != nil {
				uploaded <- fmt.Errorf("cut after %v: %w", time.Since(start), err)
				return
			}
			off += 16
			time.Sleep(idle / 4) // a slow upload: time must pass, within the idle timeout
		}
	}()
	for range maxSessions - 1 {
		z.login("acme", key)
	}
	const extra = 20
	refused := 0
	for range extra {
		if _, err := z.tryLogin("acme", key); err != nil {
			refused++
		}
	}
	// Another partner is not affected.
	z.login("other", otherKey)
	close(stop)
	if err := <-uploaded; err != nil {
		t.Fatalf("the slow upload: %v", err)
	}
	slowFor := time.Since(start)
	// All six connections go once idle: four of acme, other's, and the
	// slow one after its upload.
	eventually.NoError(t, 20*time.Second, func() error {
		if n := z.metric("payintake_sftp_idle_closed_total"); n < maxSessions+1 {
			return fmt.Errorf("idle connections closed: %v of %d", n, maxSessions+1)
		}
		return nil
	})
	t.Logf("%d sessions allowed, %d of %d more refused (too_many_sessions %v); %d idle connections closed (the slow one after its upload) within %v of the upload start (idle timeout %v); the slow upload over %v kept its connection",
		maxSessions, refused, extra, z.metric("payintake_sftp_logins_total", "result=too_many_sessions"),
		int(z.metric("payintake_sftp_idle_closed_total")), time.Since(start).Round(time.Millisecond), idle, slowFor.Round(time.Millisecond))
	if refused != extra {
		t.Fatalf("%d of %d logins over the cap refused", refused, extra)
	}
	if got := z.envelopeOf("acme", "slow.csv"); !bytes.Equal(got, data) {
		t.Fatal("the slow upload was not received whole")
	}
	// The slots are free again.
	z.login("acme", key)
}

// 500 silent sockets from one address (a NAT shared with a real partner)
// lock nobody out: they hold no login slot.
func TestHostileSFTPSilentSocketsNATNeighbour(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	z := newDropZone(t, zoneOpts{workers: -1, clock: clock})
	key := z.partner("acme")
	otherKey := z.partner("other")
	const silent = 500
	var socks []net.Conn
	for range silent {
		c, err := net.Dial("tcp", z.addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		socks = append(socks, c)
	}
	t.Cleanup(func() {
		for _, c := range socks {
			c.Close()
		}
	})
	// The partner behind the same address, with another user and with the
	// same one, logs in at once.
	var worst time.Duration
	for _, who := range []struct {
		user string
		key  ssh.Signer
	}{{"other", otherKey}, {"acme", key}, {"other", otherKey}} {
		start := time.Now()
		c, err := z.tryLogin(who.user, who.key)
		if err != nil {
			t.Fatalf("login as %s beside %d silent sockets: %v", who.user, silent, err)
		}
		put(t, c, "/inbox/nat-"+who.user+".csv", []byte(payroll))
		worst = max(worst, time.Since(start))
	}
	// A second wave, once the first has been silent for a while (the
	// gate's clock moved on, not waited for), makes room by closing the
	// oldest silent sockets.
	clock.Advance(1100 * time.Millisecond)
	for range 100 {
		c, err := net.Dial("tcp", z.addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		socks = append(socks, c)
	}
	eventually.True(t, 10*time.Second, func() bool {
		return z.metric("payintake_sftp_prelogin_closed_total", "reason=evicted") >= 100
	}, "fewer than 100 silent sockets evicted")
	evicted := z.metric("payintake_sftp_prelogin_closed_total", "reason=evicted")
	t.Logf("%d silent sockets from one address: a partner on the same address logged in and uploaded in at most %v; 100 more a second later closed %v of the oldest (at most 128 silent per address once silent for 1 s)",
		silent, worst.Round(time.Millisecond), evicted)
	if worst > 5*time.Second {
		t.Fatalf("the NAT neighbour waited %v", worst)
	}
	if evicted < 100 {
		t.Fatalf("only %v silent sockets evicted", evicted)
	}
}

// While a handle writes, what it has received is stored every
// Config.Checkpoint, its lease kept: a resume after its server died goes on
// from there. The file received at the close is the whole file, once.
func TestSFTPUploadCheckpointedWhileWriting(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{workers: -1, checkpoint: 50 * time.Millisecond})
	key := z.partner("acme")
	c := z.login("acme", key)
	f, err := c.OpenFile("/inbox/C.csv", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	stored := func() (size int64, leased bool) {
		err := z.store.Pool().QueryRow(z.ctx, `SELECT size, writer IS NOT NULL FROM sftp_uploads
			WHERE partner_id = 'acme' AND name = 'C.csv'`).Scan(&size, &leased)
		if err != nil {
			t.Fatal(err)
		}
		return size, leased
	}
	// Write on until a checkpoint holds some of it (a write after the
	// interval starts one), the handle open all along.
	eventually.NoError(t, 20*time.Second, func() error {
		if sent < len(bigPayroll)/2 {
			k := min(16<<10, len(bigPayroll)/2-sent)
			if _, err := f.Write(bigPayroll[sent : sent+k]); err != nil {
				t.Fatal(err)
			}
			sent += k
		}
		if size, leased := stored(); size == 0 || !leased {
			return fmt.Errorf("%d bytes stored (lease held: %v) of %d sent", size, leased, sent)
		}
		return nil
	})
	if size, _ := stored(); size > int64(sent) {
		t.Fatalf("%d bytes stored, only %d sent", size, sent)
	}
	if _, err := f.Write(bigPayroll[sent:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := z.envelopeOf("acme", "C.csv"); !bytes.Equal(got, bigPayroll) {
		t.Fatalf("received %d bytes, want the %d sent", len(got), len(bigPayroll))
	}
	if n := z.count(`SELECT count(*) FROM sftp_uploads`); n != 0 {
		t.Fatalf("%d unfinished uploads left after the file was received", n)
	}
}
