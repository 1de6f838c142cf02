package sftpd_test

// The client matrix: the SFTP clients partners run, installed from Debian
// packages by .ci/run, driven as partners drive them. Every case checks the
// envelope's SHA-256 against the local file and the result file the client
// downloads against the stored one.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

const (
	curlBin    = "/usr/bin/curl"
	lftpBin    = "/usr/bin/lftp"
	rcloneBin  = "/usr/bin/rclone"
	python3Bin = "/usr/bin/python3" // Debian's, with python3-paramiko
)

// clientEnv is a drop zone with partner acme, its key in OpenSSH format and
// a known_hosts file naming the zone's host key, for external clients.
type clientEnv struct {
	*dropZone
	t    *testing.T
	dir  string
	key  string
	kh   string
	port string
}

func newClientEnv(t *testing.T) *clientEnv {
	t.Helper()
	z := newDropZone(t, zoneOpts{})
	z.partner("acme")
	dir := t.TempDir()
	key := z.keyFile("acme", dir)
	kh := filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(z.addr)}, z.hostKey)
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(z.addr)
	return &clientEnv{dropZone: z, t: t, dir: dir, key: key, kh: kh, port: port}
}

// genPayroll is a valid payroll file of n rows whose employee refs start with tag.
func genPayroll(tag string, n int) []byte {
	var b bytes.Buffer
	b.WriteString("employee_ref,pay_period,component,amount,currency\n")
	for i := range n {
		fmt.Fprintf(&b, "%s%06d,2026-11,BASE,%d.%02d,USD\n", tag, i, 1000+i%5000, i%100)
	}
	return b.Bytes()
}

// local writes a file into the client's folder and returns its path.
func (ce *clientEnv) local(name string, data []byte) string {
	ce.t.Helper()
	p := filepath.Join(ce.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		ce.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		ce.t.Fatal(err)
	}
	return p
}

// run runs a client command with HOME in the test's folder.
func (ce *clientEnv) run(env []string, name string, args ...string) (string, error) {
	ce.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = ce.dir
	cmd.Env = append(os.Environ(), "HOME="+ce.dir, "SSH_AUTH_SOCK=")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (ce *clientEnv) mustRun(env []string, name string, args ...string) string {
	ce.t.Helper()
	out, err := ce.run(env, name, args...)
	if err != nil {
		ce.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// checkEnvelope checks that name was received once, holding exactly data.
func (ce *clientEnv) checkEnvelope(name string, data []byte) {
	ce.t.Helper()
	got := ce.envelopeOf("acme", name)
	if sha256.Sum256(got) != sha256.Sum256(data) {
		ce.t.Fatalf("%s: envelope sha256 %x (%d bytes), local file %x (%d bytes)", name,
			sha256.Sum256(got), len(got), sha256.Sum256(data), len(data))
	}
}

// checkResult checks a downloaded result file against the stored one.
func (ce *clientEnv) checkResult(resultName, downloaded string) {
	ce.t.Helper()
	got, err := os.ReadFile(downloaded)
	if err != nil {
		ce.t.Fatal(err)
	}
	rf, err := ce.store.ResultFileNamed(ce.ctx, "acme", resultName)
	if err != nil {
		ce.t.Fatal(err)
	}
	var stored bytes.Buffer
	if err := ce.store.WriteResult(ce.ctx, rf.EnvelopeID, &stored); err != nil {
		ce.t.Fatal(err)
	}
	if !bytes.Equal(got, stored.Bytes()) || len(got) == 0 {
		ce.t.Fatalf("%s downloaded (%d bytes) differs from the stored result (%d bytes)", resultName, len(got), stored.Len())
	}
}

// waitProcessed waits until n uploads of acme have their outcome (cut-off
// attempts, recorded as incomplete, do not count).
func (ce *clientEnv) waitProcessed(n int) {
	ce.t.Helper()
	deadline := time.Now().Add(180 * time.Second)
	for ce.count(`SELECT count(*) FROM envelopes WHERE partner_id = 'acme' AND status NOT IN ('received', 'incomplete')`) < n {
		if time.Now().After(deadline) {
			ce.t.Fatalf("fewer than %d uploads processed after 180s", n)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (ce *clientEnv) sftpArgs(extra ...string) []string {
	return append([]string{"-F", "/dev/null", "-i", ce.key, "-P", ce.port,
		"-o", "UserKnownHostsFile=" + ce.kh, "-o", "StrictHostKeyChecking=yes",
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"}, extra...)
}

func (ce *clientEnv) sftpBatch(batch string, extra ...string) string {
	ce.t.Helper()
	bf := ce.local(fmt.Sprintf("batch-%d", time.Now().UnixNano()), []byte(batch))
	return ce.mustRun(nil, opensshClient, ce.sftpArgs(append(extra, "-b", bf, "acme@127.0.0.1")...)...)
}

// waitPending waits until /inbox/name holds at least n bytes not received yet.
func (ce *clientEnv) waitPending(name string, n int64) {
	ce.t.Helper()
	c := ce.login("acme", ce.partnerKey())
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := c.Stat("/inbox/" + name); err == nil && fi.Size() >= n {
			return
		}
		if time.Now().After(deadline) {
			ce.t.Fatalf("/inbox/%s never reached %d bytes", name, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (ce *clientEnv) partnerKey() ssh.Signer {
	ce.t.Helper()
	b, err := os.ReadFile(ce.key)
	if err != nil {
		ce.t.Fatal(err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		ce.t.Fatal(err)
	}
	return s
}

// cutWhileSending starts cmd, waits until the server holds some bytes of
// /inbox/name, and kills the client: the connection is cut mid-upload.
func (ce *clientEnv) cutWhileSending(cmd *exec.Cmd, name string, atLeast int64) {
	ce.t.Helper()
	cmd.Dir = ce.dir
	cmd.Env = append(os.Environ(), "HOME="+ce.dir, "SSH_AUTH_SOCK=")
	if err := cmd.Start(); err != nil {
		ce.t.Fatal(err)
	}
	ce.waitPending(name, atLeast)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// The server has seen the cut when the upload is recorded incomplete.
	deadline := time.Now().Add(10 * time.Second)
	for ce.count(`SELECT count(*) FROM envelopes WHERE file_name = $1 AND status = 'incomplete'`, name) == 0 {
		if time.Now().After(deadline) {
			ce.t.Fatalf("the cut upload of %s was not recorded", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := ce.count(`SELECT count(*) FROM envelopes WHERE file_name = $1 AND status <> 'incomplete'`, name); n != 0 {
		ce.t.Fatalf("the cut upload of %s was received before the cut", name)
	}
}

func TestClientOpenSSH(t *testing.T) {
	t.Parallel()
	requireBinary(t, opensshClient, "openssh-client")
	ce := newClientEnv(t)
	files := map[string][]byte{}
	add := func(name string, data []byte) string {
		files[name] = data
		return ce.local(name, data)
	}
	plain := add("o-plain.csv", genPayroll("OP", 50))
	pflag := add("o-p.csv", genPayroll("OQ", 50))
	small := add("o-small-blocks.csv", genPayroll("OS", 3000))
	large := add("o-large-blocks.csv", genPayroll("OL", 10000))
	full := add("o-reput.csv", genPayroll("OR", 6000))
	half := ce.local("half/o-reput.csv", files["o-reput.csv"][:len(files["o-reput.csv"])/2])

	// No cd: the login directory is /inbox. put -p sends times and mode
	// (fsetstat). A .filepart half, reput in full, renamed (the case that
	// stored NUL bytes before).
	ce.sftpBatch(fmt.Sprintf(`put %s
put -p %s
put %s o-reput.csv.filepart
reput %s o-reput.csv.filepart
rename o-reput.csv.filepart o-reput.csv
ls -l
`, plain, pflag, half, full))
	// Few small requests, and many large ones.
	ce.sftpBatch("put "+small+"\n", "-R", "4", "-B", "4096")
	ce.sftpBatch("put "+large+"\n", "-R", "256", "-B", "131072")

	// reput after the connection was cut in an earlier session.
	cut := add("o-cut.csv", genPayroll("OC", 10000))
	bf := ce.local("batch-cut", []byte("put "+cut+"\n"))
	ce.cutWhileSending(exec.Command(opensshClient, ce.sftpArgs("-l", "500", "-b", bf, "acme@127.0.0.1")...), "o-cut.csv", 64<<10)
	ce.sftpBatch("reput " + cut + "\n")

	ce.waitProcessed(len(files))
	var gets strings.Builder
	for name, data := range files {
		ce.checkEnvelope(name, data)
		fmt.Fprintf(&gets, "get /results/%s %s/\n", strings.TrimSuffix(name, ".csv")+".result.csv", ce.dir)
	}
	ce.sftpBatch(gets.String())
	for name := range files {
		r := strings.TrimSuffix(name, ".csv") + ".result.csv"
		ce.checkResult(r, filepath.Join(ce.dir, r))
	}
	// put -p set the file's time, and stat shows it from any connection.
	fi, err := ce.login("acme", ce.partnerKey()).Stat("/inbox/o-p.csv")
	lfi, _ := os.Stat(pflag)
	if err != nil || fi.ModTime().Unix() != lfi.ModTime().Unix() {
		t.Fatalf("time of a put -p file: %v %v, want %v", fi, err, lfi.ModTime())
	}
}

func TestClientCurl(t *testing.T) {
	t.Parallel()
	requireBinary(t, curlBin, "curl")
	ce := newClientEnv(t)
	if out := ce.mustRun(nil, curlBin, "-V"); !strings.Contains(out, "sftp") {
		t.Fatalf("this curl has no sftp support (Debian's curl has, via libssh2):\n%s", out)
	}
	base := "sftp://127.0.0.1:" + ce.port
	hostSHA := strings.TrimPrefix(ssh.FingerprintSHA256(ce.hostKey), "SHA256:")
	pub := ce.local("id_ed25519.pub", ssh.MarshalAuthorizedKey(ce.partnerKey().PublicKey()))
	curl := func(args ...string) string {
		t.Helper()
		return ce.mustRun(nil, curlBin, append([]string{"-sS", "--fail", "-u", "acme:", "--key", ce.key, "--pubkey", pub,
			"--hostpubsha256", hostSHA, "--connect-timeout", "10"}, args...)...)
	}
	whole := genPayroll("CW", 100)
	curl("-T", ce.local("c-whole.csv", whole), base+"/inbox/")
	// -C - resumes a temp-named upload of the first half; a quote renames it.
	resumed := genPayroll("CR", 6000)
	curl("-T", ce.local("half/c-resumed.csv.part", resumed[:len(resumed)/3]), base+"/inbox/c-resumed.csv.part")
	curl("-C", "-", "-T", ce.local("c-resumed.csv.part", resumed), base+"/inbox/c-resumed.csv.part",
		"-Q", "-rename /inbox/c-resumed.csv.part /inbox/c-resumed.csv")
	// -C - after a cut connection.
	cutData := genPayroll("CC", 10000)
	cutFile := ce.local("c-cut.csv", cutData)
	ce.cutWhileSending(exec.Command(curlBin, "-sS", "-u", "acme:", "--key", ce.key, "--pubkey", pub, "--hostpubsha256", hostSHA,
		"--limit-rate", "64k", "-T", cutFile, base+"/inbox/c-cut.csv"), "c-cut.csv", 64<<10)
	curl("-C", "-", "-T", cutFile, base+"/inbox/c-cut.csv")

	ce.waitProcessed(3)
	for name, data := range map[string][]byte{"c-whole.csv": whole, "c-resumed.csv": resumed, "c-cut.csv": cutData} {
		ce.checkEnvelope(name, data)
		r := strings.TrimSuffix(name, ".csv") + ".result.csv"
		out := filepath.Join(ce.dir, "got-"+r)
		curl("-o", out, base+"/results/"+r)
		ce.checkResult(r, out)
	}
}

func TestClientLftp(t *testing.T) {
	t.Parallel()
	requireBinary(t, lftpBin, "lftp")
	ce := newClientEnv(t)
	files := map[string][]byte{}
	add := func(name string, data []byte) string {
		files[name] = data
		return ce.local(name, data)
	}
	one := add("l-put.csv", genPayroll("LP", 100))
	m1 := add("l-m1.csv", genPayroll("LA", 100))
	m2 := add("l-m2.csv", genPayroll("LB", 100))
	cont := add("l-cont.csv", genPayroll("LC", 6000))
	half := ce.local("half/l-cont.csv.tmp", files["l-cont.csv"][:len(files["l-cont.csv"])/2])
	tmp := add("l-temp.csv", genPayroll("LT", 100))
	connect := fmt.Sprintf("ssh -a -x -F /dev/null -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o BatchMode=yes",
		ce.key, ce.kh)
	lftp := func(script string) string {
		t.Helper()
		return ce.mustRun(nil, lftpBin, "-c", fmt.Sprintf(`set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 15
set sftp:connect-program "%s"
open -u acme, sftp://127.0.0.1:%s
%s`, connect, ce.port, script))
	}
	lftp(fmt.Sprintf(`put %s
mput %s %s
put %s -o l-cont.csv.tmp
put -c %s -o l-cont.csv.tmp
mv l-cont.csv.tmp l-cont.csv
set xfer:use-temp-file yes
put %s
`, one, m1, m2, half, cont, tmp))
	ce.waitProcessed(len(files))
	for name, data := range files {
		ce.checkEnvelope(name, data)
	}
	lftp("mirror /results " + filepath.Join(ce.dir, "mirror") + "\n")
	for name := range files {
		r := strings.TrimSuffix(name, ".csv") + ".result.csv"
		ce.checkResult(r, filepath.Join(ce.dir, "mirror", r))
	}
}

func TestClientRclone(t *testing.T) {
	t.Parallel()
	requireBinary(t, rcloneBin, "rclone")
	ce := newClientEnv(t)
	src := filepath.Join(ce.dir, "out")
	files := map[string][]byte{}
	for i := range 12 {
		name := fmt.Sprintf("r-%02d.csv", i)
		files[name] = genPayroll(fmt.Sprintf("R%02d", i), 200+i)
		ce.local(filepath.Join("out", name), files[name])
	}
	env := []string{"RCLONE_CONFIG=" + filepath.Join(ce.dir, "rclone.conf"),
		"RCLONE_CONFIG_PI_TYPE=sftp", "RCLONE_CONFIG_PI_HOST=127.0.0.1", "RCLONE_CONFIG_PI_PORT=" + ce.port,
		"RCLONE_CONFIG_PI_USER=acme", "RCLONE_CONFIG_PI_KEY_FILE=" + ce.key,
		"RCLONE_CONFIG_PI_KNOWN_HOSTS_FILE=" + ce.kh, "RCLONE_CONFIG_PI_KEY_USE_AGENT=false"}
	ce.local("rclone.conf", nil)
	rclone := func(args ...string) string {
		t.Helper()
		out, err := ce.run(env, rcloneBin, args...)
		if err != nil {
			t.Fatalf("rclone %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// A remote path without a leading slash is relative to the login
	// directory, /inbox: pi:inbox is /inbox/inbox, which cannot exist, so
	// the copy fails and nothing is received (docs/sftp.md says to write
	// pi:/inbox).
	if out, err := ce.run(env, rcloneBin, "copy", "--retries", "1", src, "pi:inbox"); err == nil {
		t.Fatalf("rclone copy to pi:inbox (/inbox/inbox) exited 0:\n%s", out)
	} else {
		t.Logf("rclone copy to pi:inbox: %v\n%s", err, out)
	}
	if n := ce.count(`SELECT count(*) FROM envelopes WHERE partner_id = 'acme'`); n != 0 {
		t.Fatalf("rclone copy to pi:inbox (/inbox/inbox) was received: %d envelopes", n)
	}
	// Default settings: exits 0 (it stats each file after upload, on
	// another of its pooled connections).
	rclone("copy", src, "pi:/inbox")
	ce.waitProcessed(len(files))
	for name, data := range files {
		ce.checkEnvelope(name, data)
	}
	// A second copy sends nothing new.
	out := rclone("copy", "-v", src, "pi:/inbox")
	if n := ce.count(`SELECT count(*) FROM envelopes WHERE partner_id = 'acme'`); n != len(files) {
		t.Fatalf("the second copy sent files again: %d envelopes\n%s", n, out)
	}
	if strings.Contains(out, "Copied") {
		t.Fatalf("the second copy copied:\n%s", out)
	}
	dst := filepath.Join(ce.dir, "results")
	rclone("copy", "pi:/results", dst)
	rclone("check", dst, "pi:/results")
	for name := range files {
		r := strings.TrimSuffix(name, ".csv") + ".result.csv"
		ce.checkResult(r, filepath.Join(dst, r))
	}
}

// paramikoScript is driven by TestClientParamiko: put(confirm=True), an
// 'ab' resume after a cut connection, listdir_attr, and WinSCP's sequence
// (upload to NAME.filepart, resume it, rename, setstat times and mode, stat).
const paramikoScript = `
import os, socket, sys, paramiko
host, port, key, kh, d = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

def connect():
    sock = socket.create_connection((host, port), timeout=15)
    t = paramiko.Transport(sock)
    t.start_client(timeout=15)
    hk = paramiko.hostkeys.HostKeys(kh)
    want = hk.lookup("[%s]:%d" % (host, port))
    got = t.get_remote_server_key()
    if want is None or want.get(got.get_name()) != got:
        sys.exit("host key mismatch")
    t.auth_publickey("acme", paramiko.Ed25519Key.from_private_key_file(key))
    return sock, t, paramiko.SFTPClient.from_transport(t)

def local(name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()

sock, t, s = connect()
# put with confirm=True stats the file after upload.
s.put(os.path.join(d, "p-put.csv"), "p-put.csv", confirm=True)

# 'ab' resume: half, then the connection is cut without a close.
data = local("p-ab.csv")
f = s.open("p-ab.csv", "wb")
f.set_pipelined(True)
f.write(data[:len(data)//2])
f.flush()
s.stat("p-ab.csv")  # the writes above have been answered
sock.shutdown(socket.SHUT_RDWR)
sock.close()

sock, t, s = connect()
import time
for _ in range(500):
    try:
        size = s.stat("p-ab.csv").st_size
        if size == len(data)//2:
            break
    except IOError:
        pass
    time.sleep(0.02)
else:
    sys.exit("the cut-off upload never showed its half")
with s.open("p-ab.csv", "ab") as f:
    f.write(data[size:])

# WinSCP: NAME.filepart, a cancelled transfer resumed from its size, rename,
# setstat times and mode, stat.
w = local("p-winscp.csv")
with s.open("p-winscp.csv.filepart", "wb") as f:
    f.write(w[:len(w)//3])
size = s.stat("p-winscp.csv.filepart").st_size
with s.open("p-winscp.csv.filepart", "ab") as f:
    f.write(w[size:])
s.rename("p-winscp.csv.filepart", "p-winscp.csv")
s.utime("p-winscp.csv", (1700000000, 1700000000))
s.chmod("p-winscp.csv", 0o644)
st = s.stat("p-winscp.csv")
if st.st_size != len(w) or int(st.st_mtime) != 1700000000:
    sys.exit("stat after setstat: size %d mtime %d" % (st.st_size, st.st_mtime))

names = {a.filename: a.st_size for a in s.listdir_attr(".")}
for n in ("p-put.csv", "p-ab.csv", "p-winscp.csv"):
    if names.get(n) != len(local(n)):
        sys.exit("listdir_attr: %r" % names)
print("ok")
`

const paramikoGet = `
import os, socket, sys, time, paramiko
host, port, key, kh, d = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
t = paramiko.Transport(socket.create_connection((host, port), timeout=15))
hk = paramiko.hostkeys.HostKeys(kh)
t.connect(hostkey=hk.lookup("[%s]:%d" % (host, port))["ssh-ed25519"], username="acme",
          pkey=paramiko.Ed25519Key.from_private_key_file(key))
s = paramiko.SFTPClient.from_transport(t)
for a in s.listdir_attr("/results"):
    s.get("/results/" + a.filename, os.path.join(d, a.filename))
print("ok")
`

func TestClientParamiko(t *testing.T) {
	t.Parallel()
	requireBinary(t, python3Bin, "python3-paramiko")
	ce := newClientEnv(t)
	files := map[string][]byte{"p-put.csv": genPayroll("PP", 100), "p-ab.csv": genPayroll("PA", 6000),
		"p-winscp.csv": genPayroll("PW", 5000)}
	for name, data := range files {
		ce.local(name, data)
	}
	script := ce.local("client.py", []byte(paramikoScript))
	args := []string{"127.0.0.1", ce.port, ce.key, ce.kh, ce.dir}
	if out := ce.mustRun(nil, python3Bin, append([]string{script}, args...)...); !strings.Contains(out, "ok") {
		t.Fatalf("paramiko:\n%s", out)
	}
	ce.waitProcessed(len(files))
	for name, data := range files {
		ce.checkEnvelope(name, data)
	}
	dl := filepath.Join(ce.dir, "results")
	if err := os.Mkdir(dl, 0o755); err != nil {
		t.Fatal(err)
	}
	get := ce.local("get.py", []byte(paramikoGet))
	ce.mustRun(nil, python3Bin, get, "127.0.0.1", ce.port, ce.key, ce.kh, dl)
	for name := range files {
		r := strings.TrimSuffix(name, ".csv") + ".result.csv"
		ce.checkResult(r, filepath.Join(dl, r))
	}
}
