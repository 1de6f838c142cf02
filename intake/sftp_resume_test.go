package intake_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, err := c2.Stat("/inbox/cut.csv")
		if err == nil && fi.Size() == int64(half) {
			size = fi.Size()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stat of the cut-off upload from a new connection: %v %v", fi, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
