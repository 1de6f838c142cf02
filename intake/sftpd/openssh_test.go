package sftpd_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/records"
)

// The OpenSSH client and server binaries these tests drive. CI installs
// them (Debian packages openssh-client and openssh-sftp-server); a missing
// one fails the test, it never skips it.
const (
	opensshClient     = "/usr/bin/sftp"
	opensshSFTPServer = "/usr/lib/openssh/sftp-server"
)

func requireBinary(t testing.TB, path, pkg string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is needed by this test: install the Debian package %s (%v)", path, pkg, err)
	}
}

// keyFile writes a fresh Ed25519 key as an OpenSSH private key file (0600)
// and registers it for the partner.
func (z *dropZone) keyFile(partner, dir string) string {
	z.t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "test")
	if err != nil {
		z.t.Fatal(err)
	}
	path := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		z.t.Fatal(err)
	}
	s, _ := ssh.NewSignerFromKey(priv)
	k, err := intake.ParseAuthorizedKeys(partner, ssh.MarshalAuthorizedKey(s.PublicKey()))
	if err != nil {
		z.t.Fatal(err)
	}
	if err := z.store.AddPartnerKey(z.ctx, k[0]); err != nil {
		z.t.Fatal(err)
	}
	return path
}

// opensshBatch runs the OpenSSH sftp client in batch mode against the zone.
func (z *dropZone) opensshBatch(user, key, knownHosts, batch string) (string, error) {
	z.t.Helper()
	_, port, _ := net.SplitHostPort(z.addr)
	bf := filepath.Join(filepath.Dir(key), fmt.Sprintf("batch-%d", time.Now().UnixNano()))
	if err := os.WriteFile(bf, []byte(batch), 0o600); err != nil {
		z.t.Fatal(err)
	}
	cmd := exec.Command(opensshClient, "-b", bf, "-F", "/dev/null", "-i", key, "-P", port,
		"-o", "UserKnownHostsFile="+knownHosts, "-o", "StrictHostKeyChecking=yes",
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
		user+"@127.0.0.1")
	cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(key))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (z *dropZone) waitEnvelopesDone(partner string, n int) {
	z.t.Helper()
	eventually.True(z.t, 30*time.Second, func() bool {
		return z.count(`SELECT count(*) FROM envelopes WHERE partner_id = $1 AND status <> 'received'`, partner) >= n
	}, "fewer than %d envelopes of %s processed", n, partner)
}

func TestOpenSSHClientBatchMode(t *testing.T) {
	t.Parallel()
	requireBinary(t, opensshClient, "openssh-client")
	z := newDropZone(t, zoneOpts{})
	z.partner("acme")
	dir := t.TempDir()
	key := z.keyFile("acme", dir)
	kh := filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(z.addr)}, z.hostKey)
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "payroll.csv")
	if err := os.WriteFile(local, []byte(payroll), 0o644); err != nil {
		t.Fatal(err)
	}

	// Upload plainly, with -p (times and modes: a setstat), and via a temp
	// name renamed into place (posix-rename).
	out, err := z.opensshBatch("acme", key, kh, fmt.Sprintf(`cd /inbox
put %[1]s
put -p %[1]s /inbox/preserved.csv
put %[1]s /inbox/renamed.csv.part
rename /inbox/renamed.csv.part /inbox/renamed.csv
ls -l /inbox/renamed.csv
-mkdir /inbox/sub
-put %[1]s /results/nope.csv
-put %[1]s /etc/nope.csv
`, local))
	if err != nil {
		t.Fatalf("sftp batch upload: %v\n%s", err, out)
	}
	z.waitEnvelopesDone("acme", 3)

	out, err = z.opensshBatch("acme", key, kh, fmt.Sprintf(`ls -l /results
get /results/payroll.result.csv %[1]s/
get /results/preserved.result.csv %[1]s/
get /results/renamed.result.csv %[1]s/
`, dir))
	if err != nil {
		t.Fatalf("sftp batch download: %v\n%s", err, out)
	}
	for _, want := range []string{"payroll.result.csv", "preserved.result.csv", "renamed.result.csv"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls -l /results lacks %s:\n%s", want, out)
		}
		got, err := os.ReadFile(filepath.Join(dir, want))
		if err != nil {
			t.Fatal(err)
		}
		rf, err := z.store.ResultFileNamed(z.ctx, "acme", want)
		if err != nil {
			t.Fatal(err)
		}
		var stored bytes.Buffer
		if err := z.store.WriteResult(z.ctx, rf.EnvelopeID, &stored); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, stored.Bytes()) || !strings.HasPrefix(string(got), records.ResultHeader) {
			t.Errorf("%s downloaded differs from the stored result:\n%s", want, got)
		}
	}
	if n := z.count(`SELECT count(*) FROM envelopes WHERE partner_id = 'acme'`); n != 3 {
		t.Errorf("envelopes: %d, want 3", n)
	}

	// Escapes fail in batch mode too, and write nothing locally.
	for _, p := range []string{"/etc/passwd", "../../../etc/passwd", `..\..\etc\passwd`} {
		target := filepath.Join(dir, "stolen")
		if out, err := z.opensshBatch("acme", key, kh, fmt.Sprintf("get %s %s\n", p, target)); err == nil {
			t.Errorf("get %s worked:\n%s", p, out)
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("get %s wrote %s", p, target)
		}
	}
}

// BenchmarkUpload50MB compares upload throughput of one 50 MB file to the
// drop zone (SSH on loopback; the close is answered once the file is
// hashed and stored in PostgreSQL) with OpenSSH's own sftp-server (over
// pipes, no SSH, writing to a local file), both from the pkg/sftp client
// with concurrent writes, in the same run.
func BenchmarkUpload50MB(b *testing.B) {
	requireBinary(b, opensshSFTPServer, "openssh-sftp-server")
	data := make([]byte, 50<<20)
	_, _ = rand.Read(data)

	z := newDropZone(b, zoneOpts{workers: -1})
	key := z.partner("bench")
	ours, err := z.tryLogin("bench", key, sftp.UseConcurrentWrites(true))
	if err != nil {
		b.Fatal(err)
	}

	dir := b.TempDir()
	cmd := exec.Command(opensshSFTPServer)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	theirs, err := sftp.NewClientPipe(stdout, stdin, sftp.UseConcurrentWrites(true))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { theirs.Close() })

	var tOurs, tTheirs, tClose time.Duration
	n := 0
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		name := fmt.Sprintf("upload-%d.csv", n)
		n++
		start := time.Now()
		f, err := ours.Create("/inbox/" + name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		closing := time.Now()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		tClose += time.Since(closing)
		tOurs += time.Since(start)

		start = time.Now()
		put(b, theirs, filepath.Join(dir, name), data)
		tTheirs += time.Since(start)
		_ = os.Remove(filepath.Join(dir, name))
	}
	mb := float64(len(data)) * float64(n) / 1e6
	b.ReportMetric(mb/tOurs.Seconds(), "payintake_MB/s")
	b.ReportMetric(mb/tTheirs.Seconds(), "openssh_MB/s")
	b.ReportMetric(tTheirs.Seconds()/tOurs.Seconds(), "payintake/openssh")
	// The part of ours spent after the last byte: hashing and storing the
	// file in PostgreSQL before the close is answered.
	b.ReportMetric(float64(tClose.Milliseconds())/float64(n), "close_ms/op")
	b.ReportMetric(mb/(tOurs-tClose).Seconds(), "payintake_transfer_MB/s")
}
