package sftpd_test

// Two servers on one database, as replicas behind a balancer: an upload cut
// off on one is listed by the other and resumed there by each client
// partners use, and what is received is the whole file.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// paramikoResume continues /inbox/NAME on a server from its size with an
// 'ab' open (as paramiko users and WinSCP's .filepart resume do), then
// renames it to RENAME unless that is "-".
const paramikoResume = `
import os, socket, sys, paramiko
host, port, key, kh, d, name, rename = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
t = paramiko.Transport(socket.create_connection((host, port), timeout=15))
hk = paramiko.hostkeys.HostKeys(kh)
t.connect(hostkey=hk.lookup("[%s]:%d" % (host, port))["ssh-ed25519"], username="acme",
          pkey=paramiko.Ed25519Key.from_private_key_file(key))
s = paramiko.SFTPClient.from_transport(t)
with open(os.path.join(d, sys.argv[8]), "rb") as f:
    data = f.read()
size = s.stat(name).st_size
if not 0 < size < len(data):
    sys.exit("stat %s: %d bytes of %d" % (name, size, len(data)))
with s.open(name, "ab") as f:
    f.write(data[size:])
if rename != "-":
    s.rename(name, rename)
print("ok")
`

func TestSFTPResumeOnAnotherServer(t *testing.T) {
	t.Parallel()
	requireBinary(t, opensshClient, "openssh-client")
	requireBinary(t, curlBin, "curl")
	requireBinary(t, lftpBin, "lftp")
	requireBinary(t, python3Bin, "python3-paramiko")
	a := newClientEnv(t)
	zb := newDropZone(t, zoneOpts{url: a.url})
	_, portB, _ := net.SplitHostPort(zb.addr)
	b := &clientEnv{dropZone: zb, t: t, dir: a.dir, key: a.key, kh: a.kh, port: portB}
	// One known_hosts naming both servers (each has its own host key here).
	lines := knownhosts.Line([]string{knownhosts.Normalize(a.addr)}, a.hostKey) + "\n" +
		knownhosts.Line([]string{knownhosts.Normalize(zb.addr)}, zb.hostKey) + "\n"
	if err := os.WriteFile(a.kh, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}

	files := map[string][]byte{}
	// cutOnA starts an OpenSSH upload of data as remote on server A, slowed
	// down, and cuts it once A holds some of it; then checks that B lists
	// the unfinished file with the size A stored.
	cutOnA := func(local, remote string, data []byte) string {
		t.Helper()
		path := a.local(local, data)
		bf := a.local("batch-"+remote, []byte(fmt.Sprintf("put %s %s\n", path, remote)))
		a.cutWhileSending(exec.Command(opensshClient, a.sftpArgs("-l", "800", "-b", bf, "acme@127.0.0.1")...), remote, 64<<10)
		stored := int64(a.count(`SELECT size FROM sftp_uploads WHERE partner_id = 'acme' AND name = $1`, remote))
		if stored < 64<<10 || stored >= int64(len(data)) {
			t.Fatalf("%s: %d bytes stored after the cut, want at least %d and less than %d", remote, stored, 64<<10, len(data))
		}
		list, err := b.login("acme", a.partnerKey()).ReadDir("/inbox")
		if err != nil {
			t.Fatal(err)
		}
		for _, fi := range list {
			if fi.Name() == remote {
				if fi.Size() != stored {
					t.Fatalf("server B lists %s with %d bytes, %d are stored", remote, fi.Size(), stored)
				}
				return path
			}
		}
		t.Fatalf("server B does not list the unfinished %s: %v", remote, list)
		return ""
	}

	// OpenSSH reput.
	data := genPayroll("FO", 12000)
	files["f-reput.csv"] = data
	b.sftpBatch("reput " + cutOnA("f-reput.csv", "f-reput.csv", data) + "\n")

	// curl -C -.
	data = genPayroll("FC", 12000)
	files["f-curl.csv"] = data
	path := cutOnA("f-curl.csv", "f-curl.csv", data)
	pub := b.local("id_ed25519.pub", ssh.MarshalAuthorizedKey(a.partnerKey().PublicKey()))
	b.mustRun(nil, curlBin, "-sS", "--fail", "-u", "acme:", "--key", b.key, "--pubkey", pub, "--hostpubsha256", strings.TrimPrefix(ssh.FingerprintSHA256(zb.hostKey), "SHA256:"),
		"-C", "-", "-T", path, "sftp://127.0.0.1:"+portB+"/inbox/f-curl.csv")

	// lftp put -c.
	data = genPayroll("FL", 12000)
	files["f-lftp.csv"] = data
	path = cutOnA("f-lftp.csv", "f-lftp.csv", data)
	connect := fmt.Sprintf("ssh -a -x -F /dev/null -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o BatchMode=yes",
		b.key, b.kh)
	b.mustRun(nil, lftpBin, "-c", fmt.Sprintf(`set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 15
set sftp:connect-program "%s"
open -u acme, sftp://127.0.0.1:%s
put -c %s -o f-lftp.csv
`, connect, portB, path))

	// paramiko 'ab', and WinSCP's .filepart resumed and renamed.
	script := b.local("resume.py", []byte(paramikoResume))
	data = genPayroll("FP", 12000)
	files["f-ab.csv"] = data
	cutOnA("f-ab.csv", "f-ab.csv", data)
	if out := b.mustRun(nil, python3Bin, script, "127.0.0.1", portB, b.key, b.kh, b.dir, "f-ab.csv", "-", "f-ab.csv"); !strings.Contains(out, "ok") {
		t.Fatalf("paramiko:\n%s", out)
	}
	data = genPayroll("FW", 12000)
	files["f-winscp.csv"] = data
	cutOnA("f-winscp.csv", "f-winscp.csv.filepart", data)
	if out := b.mustRun(nil, python3Bin, script, "127.0.0.1", portB, b.key, b.kh, b.dir, "f-winscp.csv.filepart", "f-winscp.csv", "f-winscp.csv"); !strings.Contains(out, "ok") {
		t.Fatalf("paramiko (WinSCP's sequence):\n%s", out)
	}

	// Server A stops (its listener and connections closed, as a replica
	// stops) in the middle of an upload: resumed on B.
	data = genPayroll("FS", 12000)
	files["f-stop.csv"] = data
	path = a.local("f-stop.csv", data)
	bf := a.local("batch-stop", []byte("put "+path+"\n"))
	cmd := exec.Command(opensshClient, a.sftpArgs("-l", "800", "-b", bf, "acme@127.0.0.1")...)
	cmd.Dir, cmd.Env = a.dir, append(os.Environ(), "HOME="+a.dir, "SSH_AUTH_SOCK=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.waitPending("f-stop.csv", 64<<10)
	a.stop()
	if err := cmd.Wait(); err == nil {
		t.Fatal("the upload to the stopped server A ended well")
	}
	b.sftpBatch("reput " + path + "\n")

	b.waitProcessed(len(files))
	for name, data := range files {
		b.checkEnvelope(name, data)
		if n := b.count(`SELECT count(*) FROM envelopes WHERE partner_id = 'acme' AND file_name = $1 AND status NOT IN ('incomplete')`, name); n != 1 {
			t.Fatalf("%s: %d envelopes, want 1", name, n)
		}
	}
	if n := b.count(`SELECT count(*) FROM sftp_uploads`); n != 0 {
		t.Fatalf("%d unfinished uploads left after every file was received", n)
	}
	r := filepath.Join(b.dir, "f-reput.result.csv")
	b.sftpBatch("get /results/f-reput.result.csv " + r + "\n")
	b.checkResult("f-reput.result.csv", r)
}
