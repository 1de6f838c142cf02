package sftpd_test

// The client matrix: the SFTP clients partners run, installed from Debian
// packages by .ci/run, driven as partners drive them. Every case checks the
// envelope's SHA-256 against the local file and the result file the client
// downloads against the stored one.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
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

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/eventually"
)

const (
	curlBin    = "/usr/bin/curl"
	lftpBin    = "/usr/bin/lftp"
	rcloneBin  = "/usr/bin/rclone"
	python3Bin = "/usr/bin/python3" // Debian's, with python3-paramiko
)

// clientEnv is a drop zone with partner acme, its key in OpenSSH format and
// a known_hosts file naming the zone's host keys (all three, as the
// contract tells partners: clients pick different types), for external
// clients.
type clientEnv struct {
	*dropZone
	t    *testing.T
	dir  string
	key  string
	kh   string
	port string
	// jschKey and jschClasspath: set by jsch.
	jschKey, jschClasspath string
}

func newClientEnv(t *testing.T) *clientEnv {
	t.Helper()
	return newClientEnvWith(t, zoneOpts{})
}

func newClientEnvWith(t *testing.T, o zoneOpts) *clientEnv {
	t.Helper()
	z := newDropZone(t, o)
	z.partner("acme")
	dir := t.TempDir()
	key := z.keyFile("acme", dir)
	kh := filepath.Join(dir, "known_hosts")
	var lines strings.Builder
	for _, k := range testHostKeys(t).Active {
		lines.WriteString(knownhosts.Line([]string{knownhosts.Normalize(z.addr)}, k.PublicKey()) + "\n")
	}
	if err := os.WriteFile(kh, []byte(lines.String()), 0o600); err != nil {
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
	eventually.True(ce.t, 180*time.Second, func() bool {
		return ce.count(`SELECT count(*) FROM envelopes WHERE partner_id = 'acme' AND status NOT IN ('received', 'incomplete')`) >= n
	}, "fewer than %d uploads processed", n)
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
	eventually.True(ce.t, 30*time.Second, func() bool {
		fi, err := c.Stat("/inbox/" + name)
		return err == nil && fi.Size() >= n
	}, "/inbox/%s never reached %d bytes", name, n)
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
	eventually.True(ce.t, 10*time.Second, func() bool {
		return ce.count(`SELECT count(*) FROM envelopes WHERE file_name = $1 AND status = 'incomplete'`, name) > 0
	}, "the cut upload of %s was not recorded", name)
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
	// libssh2 prefers the ECDSA host key: its fingerprint is the one to pin.
	hostSHA := strings.TrimPrefix(ssh.FingerprintSHA256(activeKey(t, testHostKeys(t), ssh.KeyAlgoECDSA256)), "SHA256:")
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

const (
	javacBin = "/usr/bin/javac" // default-jdk-headless
	javaBin  = "/usr/bin/java"
	jschJar  = "/usr/share/java/jsch.jar" // libjsch-java 0.1.55
	psftpBin = "/usr/bin/psftp"           // putty-tools
	puttygen = "/usr/bin/puttygen"
)

// jschSource is a partner's Java integration written for JSch 0.1.55, one
// file that cmd/payintake's fleet test runs too.
const jschSource = "testdata/jsch/JSchClient.java"

// ecdsaKeyFile writes a fresh ECDSA P-256 key as PEM (SEC 1, the format
// JSch 0.1.55 reads) and registers it for the partner.
func (ce *clientEnv) ecdsaKeyFile(partner string) string {
	ce.t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ce.t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		ce.t.Fatal(err)
	}
	path := filepath.Join(ce.dir, "id_ecdsa")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		ce.t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		ce.t.Fatal(err)
	}
	k, err := intake.ParseAuthorizedKeys(partner, ssh.MarshalAuthorizedKey(s.PublicKey()))
	if err != nil {
		ce.t.Fatal(err)
	}
	if err := ce.store.AddPartnerKey(ce.ctx, k[0]); err != nil {
		ce.t.Fatal(err)
	}
	return path
}

// JSch 0.1.55 knows no Ed25519 and no rsa-sha2 signatures: it connects
// with the ECDSA host key (ecdh-sha2-nistp256, aes128-ctr, hmac-sha2-256).
func TestClientJSch(t *testing.T) {
	t.Parallel()
	ce := newClientEnv(t)
	jsch := ce.jsch()
	data := genPayroll("JS", 2000)
	if out := jsch(ce.kh, "put", ce.local("j-put.csv", data), "/inbox/j-put.csv"); !strings.Contains(out, "ok host key ecdsa-sha2-nistp256") {
		t.Fatalf("jsch put:\n%s", out)
	}
	ce.waitProcessed(1)
	ce.checkEnvelope("j-put.csv", data)
	got := filepath.Join(ce.dir, "j-put.result.csv")
	jsch(ce.kh, "get", got, "/results/j-put.result.csv")
	ce.checkResult("j-put.result.csv", got)
}

// jsch compiles the JSch client and returns a function that runs it as
// acme with an ECDSA key, known_hosts kh, one put or get.
func (ce *clientEnv) jsch() func(kh, op, local, remote string) string {
	t := ce.t
	requireBinary(t, javacBin, "default-jdk-headless")
	requireBinary(t, javaBin, "default-jdk-headless")
	requireBinary(t, jschJar, "libjsch-java")
	classes := t.TempDir()
	src, err := filepath.Abs(jschSource)
	if err != nil {
		t.Fatal(err)
	}
	ce.mustRun(nil, javacBin, "-cp", jschJar, "-d", classes, src)
	ce.jschKey = ce.ecdsaKeyFile("acme")
	ce.jschClasspath = classes + string(os.PathListSeparator) + jschJar
	return func(kh, op, local, remote string) string {
		t.Helper()
		return ce.mustRun(nil, javaBin, "-cp", ce.jschClasspath, "JSchClient",
			"127.0.0.1", ce.port, "acme", ce.jschKey, kh, op, local, remote)
	}
}

// PuTTY's psftp (what WinSCP is built on) in batch mode, the host key
// given by fingerprint, the key converted to PuTTY's format.
func TestClientPsftp(t *testing.T) {
	t.Parallel()
	requireBinary(t, psftpBin, "putty-tools")
	requireBinary(t, puttygen, "putty-tools")
	ce := newClientEnv(t)
	ppk := filepath.Join(ce.dir, "id.ppk")
	ce.mustRun(nil, puttygen, ce.key, "-O", "private", "-o", ppk)
	args := []string{"-batch", "-i", ppk, "-P", ce.port, "-l", "acme"}
	for _, k := range testHostKeys(t).Active {
		args = append(args, "-hostkey", ssh.FingerprintSHA256(k.PublicKey()))
	}
	psftp := func(script string) string {
		t.Helper()
		bf := ce.local(fmt.Sprintf("psftp-%d", time.Now().UnixNano()), []byte(script))
		return ce.mustRun(nil, psftpBin, append(args, "-b", bf, "127.0.0.1")...)
	}
	files := map[string][]byte{"w-put.csv": genPayroll("WP", 500), "w-reput.csv": genPayroll("WR", 6000)}
	put := ce.local("w-put.csv", files["w-put.csv"])
	full := ce.local("w-reput.csv", files["w-reput.csv"])
	half := ce.local("half/w-reput.csv", files["w-reput.csv"][:len(files["w-reput.csv"])/2])
	// No cd: the login directory is /inbox. A half, then reput of the whole.
	psftp(fmt.Sprintf("put %s\nput %s w-reput.csv.filepart\nreput %s w-reput.csv.filepart\nmv w-reput.csv.filepart w-reput.csv\n", put, half, full))
	ce.waitProcessed(len(files))
	var gets strings.Builder
	for name, data := range files {
		ce.checkEnvelope(name, data)
		r := strings.TrimSuffix(name, ".csv") + ".result.csv"
		fmt.Fprintf(&gets, "get /results/%s %s\n", r, filepath.Join(ce.dir, "got-"+r))
	}
	psftp(gets.String())
	for name := range files {
		r := strings.TrimSuffix(name, ".csv") + ".result.csv"
		ce.checkResult(r, filepath.Join(ce.dir, "got-"+r))
	}
}

// JSch 0.1.55 prefers ssh-rsa (SHA-1) host keys and knows no rsa-sha2:
// with --ssh-legacy-algorithms it picks the RSA key (its known_hosts must
// hold that line), without it the ECDSA key; a JSch that knows only the RSA
// key is refused unless the flag is on.
func TestClientJSchLegacyRSA(t *testing.T) {
	t.Parallel()
	for _, legacy := range []bool{false, true} {
		ce := newClientEnvWith(t, zoneOpts{legacy: legacy, workers: -1})
		jsch := ce.jsch()
		want := "ok host key ecdsa-sha2-nistp256"
		if legacy {
			want = "ok host key ssh-rsa"
		}
		if out := jsch(ce.kh, "put", ce.local("all.csv", genPayroll("JA", 10)), "/inbox/all.csv"); !strings.Contains(out, want) {
			t.Fatalf("legacy %v, all three keys in known_hosts: %s, want %s", legacy, out, want)
		}
		rsaOnly := filepath.Join(ce.dir, "known_hosts.rsa")
		line := knownhosts.Line([]string{knownhosts.Normalize(ce.addr)}, activeKey(t, testHostKeys(t), ssh.KeyAlgoRSA))
		if err := os.WriteFile(rsaOnly, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := ce.run(nil, javaBin, "-cp", ce.jschClasspath, "JSchClient", "127.0.0.1", ce.port, "acme", ce.jschKey, rsaOnly,
			"put", ce.local("rsa.csv", genPayroll("JR", 10)), "/inbox/rsa.csv")
		if legacy && (err != nil || !strings.Contains(out, "ok host key ssh-rsa")) {
			t.Fatalf("with legacy algorithms, JSch knowing only the RSA key: %v\n%s", err, out)
		}
		if !legacy && err == nil {
			t.Fatalf("without legacy algorithms, JSch knowing only the RSA key connected:\n%s", out)
		}
	}
}

// A partner who pinned only the Ed25519 key (as before the ECDSA and RSA
// keys existed) with a client that picks ECDSA first — rclone, like every
// Go client and curl — is refused while the server offers ECDSA, and
// served when the operator limits the host key types to Ed25519.
func TestClientPinnedToEd25519(t *testing.T) {
	t.Parallel()
	requireBinary(t, rcloneBin, "rclone")
	for _, types := range [][]string{nil, {ssh.KeyAlgoED25519}} {
		ce := newClientEnvWith(t, zoneOpts{keyTypes: types, workers: -1})
		kh := filepath.Join(ce.dir, "known_hosts.ed25519")
		if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{knownhosts.Normalize(ce.addr)}, ce.hostKey)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"RCLONE_CONFIG=" + filepath.Join(ce.dir, "rclone.conf"),
			"RCLONE_CONFIG_PI_TYPE=sftp", "RCLONE_CONFIG_PI_HOST=127.0.0.1", "RCLONE_CONFIG_PI_PORT=" + ce.port,
			"RCLONE_CONFIG_PI_USER=acme", "RCLONE_CONFIG_PI_KEY_FILE=" + ce.key,
			"RCLONE_CONFIG_PI_KNOWN_HOSTS_FILE=" + kh, "RCLONE_CONFIG_PI_KEY_USE_AGENT=false"}
		ce.local("rclone.conf", nil)
		out, err := ce.run(env, rcloneBin, "lsf", "--retries", "1", "--low-level-retries", "1", "pi:/inbox")
		switch {
		case types == nil && (err == nil || !strings.Contains(out, "key mismatch")):
			t.Fatalf("rclone pinned to the Ed25519 key, all key types served: %v\n%s", err, out)
		case types != nil && err != nil:
			t.Fatalf("rclone pinned to the Ed25519 key, only Ed25519 served: %v\n%s", err, out)
		}
	}
}
