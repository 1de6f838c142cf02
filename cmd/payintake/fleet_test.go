package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/internal/syncbuf"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/review"
)

// fleet is three `payintake serve` replicas on one database behind
// Debian's HAProxy running the shipped deploy/haproxy/haproxy.cfg, the way
// platforms deploy it. The balancer reaches the replicas from 127.0.0.1,
// which they trust to send PROXY headers and X-Forwarded-For; partners'
// clients bind other loopback addresses (127.0.0.2 and up), so each has an
// address of its own as partners' hosts do.
type fleet struct {
	t        *testing.T
	url      string
	st       *records.Store
	replicas [3]*server
	sftpAddr string // the balancer's
	httpAddr string
	proxyLog *syncbuf.Buffer
	secret   string
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{t: t, url: pgtest.New(t), proxyLog: &syncbuf.Buffer{}}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	// Every replica has the one secret key, as a Kubernetes Secret gives it;
	// nothing else is copied between them.
	f.secret = base64.StdEncoding.EncodeToString(key)
	for i := range f.replicas {
		f.replicas[i] = startServer(t, f.url, filepath.Join(t.TempDir(), fmt.Sprint("replica", i)),
			[]string{"PAYINTAKE_SECRET_KEY=" + f.secret},
			"--workers", "2", "--trusted-proxies", "127.0.0.1/32", "--drain-timeout", "60s",
			// An upload cut by a replica's death resumes from its last
			// checkpoint: often here, so the test's short upload has some.
			"--sftp-checkpoint", "300ms")
	}
	st, err := records.Open(context.Background(), f.url, records.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	f.st = st
	f.sftpAddr = freePort(t)
	f.httpAddr = freePort(t)
	var addrs [3]struct{ SFTP, HTTP string }
	for i, r := range f.replicas {
		addrs[i].SFTP, addrs[i].HTTP = r.sftpAddr, r.httpAddr
	}
	proxy := exec.Command("haproxy", "-db", "-f", "../../deploy/haproxy/haproxy.cfg")
	proxy.Env = haproxyEnv(t, f.sftpAddr, f.httpAddr, addrs)
	proxy.Stdout, proxy.Stderr = f.proxyLog, f.proxyLog
	if err := proxy.Start(); err != nil {
		t.Fatalf("haproxy: %v", err)
	}
	t.Cleanup(func() {
		_ = proxy.Process.Kill()
		_ = proxy.Wait()
		if t.Failed() {
			t.Logf("haproxy log tail:\n%s", tail(f.proxyLog.String(), 4000))
		}
	})
	f.waitBalancer()
	return f
}

// waitBalancer waits until HAProxy accepts SFTP connections and answers
// /readyz through a replica it takes for ready.
func (f *fleet) waitBalancer() {
	f.t.Helper()
	eventually.NoError(f.t, 60*time.Second, func() error {
		c, err := net.DialTimeout("tcp", f.sftpAddr, time.Second)
		if err != nil {
			return fmt.Errorf("HAProxy does not accept SFTP connections: %w", err)
		}
		c.Close()
		resp, err := http.Get("http://" + f.httpAddr + "/readyz")
		if err != nil {
			return fmt.Errorf("HAProxy does not answer /readyz: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HAProxy answers /readyz with %d: no replica ready behind it", resp.StatusCode)
		}
		return nil
	})
}

// freePort returns a loopback port free at the time of the call.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// dialFrom opens an SSH connection to addr from the loopback address local.
func dialFrom(local, addr string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	sc, chans, reqs, err := ssh.NewClientConn(c, addr, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

// hostKeysOf returns the host key addr shows for each algorithm, in
// authorized_keys form.
func hostKeysOf(t *testing.T, local, addr string, algos []string) map[string]string {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	keys := map[string]string{}
	for _, a := range algos {
		var got ssh.PublicKey
		_, err := dialFrom(local, addr, &ssh.ClientConfig{User: "nobody", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyAlgorithms: []string{a}, Timeout: 10 * time.Second,
			HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
				got = k
				return errors.New("host key seen")
			}})
		if got == nil {
			t.Fatalf("%s shows no %s host key: %v", addr, a, err)
		}
		keys[a] = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(got)))
	}
	return keys
}

// partnerKeyFile adds partner id with a fresh key and writes the key where
// OpenSSH's clients read it (-i).
func partnerKeyFile(t *testing.T, st *records.Store, id string) (ssh.Signer, string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer := addPartnerKey(t, st, id, priv)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), id+"_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return signer, path
}

// openSSHSFTP runs OpenSSH's sftp in batch mode from the loopback address
// local against addr, as partner with the key file, trusting only the
// host keys in knownHosts (a changed host key fails the connection).
func openSSHSFTP(t *testing.T, local, addr, partner, keyFile, knownHosts, batch string, extra ...string) *exec.Cmd {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	args := append([]string{"-b", "-", "-i", keyFile, "-P", port,
		"-o", "BindAddress=" + local, "-o", "UserKnownHostsFile=" + knownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes", "-o", "UpdateHostKeys=no", "-o", "BatchMode=yes",
		"-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10"}, extra...)
	cmd := exec.Command("sftp", append(args, partner+"@"+host)...)
	cmd.Stdin = strings.NewReader(batch)
	return cmd
}

// The clients of the fleet test beyond OpenSSH, from Debian packages.
const (
	javacBin    = "/usr/bin/javac" // default-jdk-headless
	javaBin     = "/usr/bin/java"
	jschJar     = "/usr/share/java/jsch.jar" // libjsch-java 0.1.55
	psftpBin    = "/usr/bin/psftp"           // putty-tools
	puttygenBin = "/usr/bin/puttygen"
	// jschSource is the JSch client of intake/sftpd's client tests: one
	// Java source for both.
	jschSource = "../../intake/sftpd/testdata/jsch/JSchClient.java"
)

// loginsOf counts the logins a replica has logged.
func loginsOf(s *server) int { return strings.Count(s.logs.String(), `msg="logged in"`) }

// TestFleet: three replicas on one database behind HAProxy, as platforms
// deploy payintake: the same host keys from every replica; OpenSSH
// through the balancer; results identical from every replica; JSch, PuTTY
// psftp and Node's ssh2-sftp-client through the balancer, their results
// the replicas'; failed
// logins from one address not locking out another; a partner's allowlist
// applied to the client's address; an upload cut by the
// SIGKILL of its replica resumed through another; SIGTERM of a replica
// during an upload letting the upload finish.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("three replicas behind HAProxy: not in -short")
	}
	f := newFleet(t)
	_, acmeKey := partnerKeyFile(t, f.st, "acme")

	// The same host keys, of each type, from every replica, with nothing
	// copied: connect to each replica directly (from an untrusted address,
	// so without a PROXY header).
	algos := []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoRSASHA256}
	want := hostKeysOf(t, "127.0.0.2", f.replicas[0].sftpAddr, algos)
	for i, r := range f.replicas[1:] {
		if got := hostKeysOf(t, "127.0.0.2", r.sftpAddr, algos); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("replica %d shows host keys\n%v\nreplica 0 shows\n%v", i+1, got, want)
		}
	}
	knownHosts := filepath.Join(t.TempDir(), "known_hosts")
	host, port, _ := net.SplitHostPort(f.sftpAddr)
	var kh bytes.Buffer
	for _, a := range algos {
		fmt.Fprintf(&kh, "[%s]:%s %s\n", host, port, want[a])
	}
	if err := os.WriteFile(knownHosts, kh.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	// OpenSSH through the balancer, nine connections: every one accepts the
	// host key it is shown, and the balancer spreads them over the replicas.
	local := filepath.Join(t.TempDir(), "fleet.csv")
	if err := os.WriteFile(local, payrollFile("F", 200), 0o644); err != nil {
		t.Fatal(err)
	}
	before := [3]int{}
	for i, r := range f.replicas {
		before[i] = loginsOf(r)
	}
	if out, err := openSSHSFTP(t, "127.0.0.2", f.sftpAddr, "acme", acmeKey, knownHosts, "put "+local+" /inbox/fleet.csv\n").CombinedOutput(); err != nil {
		t.Fatalf("sftp put through HAProxy: %v\n%s", err, out)
	}
	got := filepath.Join(t.TempDir(), "fleet.result.csv")
	get := func() error {
		out, err := openSSHSFTP(t, "127.0.0.2", f.sftpAddr, "acme", acmeKey, knownHosts, "get /results/fleet.result.csv "+got+"\n").CombinedOutput()
		if err != nil {
			return fmt.Errorf("sftp get through HAProxy: %v\n%s", err, out)
		}
		return nil
	}
	// Once the file is processed, eight more connections, every one
	// served the result.
	eventually.NoError(t, 60*time.Second, get)
	for range 7 {
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range f.replicas {
		if loginsOf(r) == before[i] {
			t.Errorf("replica %d had no login of the nine through HAProxy: the balancer did not spread them", i)
		}
	}
	viaBalancer, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, "fleet.csv", viaBalancer, 200, "created")

	// The result is the same, byte for byte, from every replica.
	for i, r := range f.replicas {
		if res := replicaResult(t, r, acmeKey, "fleet.csv", 0); !bytes.Equal(res, viaBalancer) {
			t.Fatalf("replica %d's result differs:\n%s\nthrough the balancer:\n%s", i, res, viaBalancer)
		}
	}

	// The other clients partners run, through the balancer, trusting the
	// host keys OpenSSH trusted.
	t.Run("JSch through the balancer", func(t *testing.T) { fleetJSch(t, f, knownHosts) })
	t.Run("PuTTY psftp through the balancer", func(t *testing.T) { fleetPsftp(t, f, acmeKey, want) })
	t.Run("Node ssh2-sftp-client through the balancer", func(t *testing.T) { fleetNode(t, f, acmeKey, want) })

	t.Run("failed logins from one address do not lock out another", func(t *testing.T) { fleetLockout(t, f, acmeKey, knownHosts) })
	t.Run("a partner's --allow-from holds for the client's address", func(t *testing.T) { fleetAllowFrom(t, f, acmeKey, knownHosts) })
	t.Run("an upload cut by SIGKILL of its replica resumes on another", func(t *testing.T) { fleetResume(t, f, acmeKey, knownHosts, false) })
	t.Run("SIGTERM of a replica lets its upload finish", func(t *testing.T) { fleetResume(t, f, acmeKey, knownHosts, true) })
}

// replicaResult downloads the result of name from replica r directly (from
// an untrusted address, so without a PROXY header), waiting for it up to
// within.
func replicaResult(t *testing.T, r *server, keyFile, name string, within time.Duration) []byte {
	t.Helper()
	c, err := dialFrom("127.0.0.2", r.sftpAddr, &ssh.ClientConfig{User: "acme", Auth: []ssh.AuthMethod{ssh.PublicKeys(mustSigner(t, keyFile))},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("%s: %v", r.sftpAddr, err)
	}
	defer c.Close()
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if within > 0 {
		return (&client{sc, c}).waitResult(t, name, within)
	}
	res, err := (&client{sc, c}).result(name)
	if err != nil {
		t.Fatalf("the result of %s from %s: %v", name, r.sftpAddr, err)
	}
	return res
}

// loggedIn reports whether a replica logged a login from the address
// local by a client whose version string contains client. A replica's log
// reaches the test through a pipe, after the client may have finished:
// callers wait for it.
func loggedIn(f *fleet, local, client string) bool {
	return f.logged(regexp.MustCompile(`msg="logged in".* remote=` + regexp.QuoteMeta(local) + `:\d+ .*client=\S*` + regexp.QuoteMeta(client)))
}

// logged tells whether a replica's log has a line matching re.
func (f *fleet) logged(re *regexp.Regexp) bool {
	for _, r := range f.replicas {
		if re.MatchString(r.logs.String()) {
			return true
		}
	}
	return false
}

// fleetJSch: a Java integration on JSch 0.1.55 (the client of
// intake/sftpd's client tests, one source for both) uploads from 127.0.0.7
// through the balancer and downloads its result, checking the host key
// against the known_hosts OpenSSH used. JSch knows no Ed25519 and is
// offered no SHA-1 ssh-rsa, so it is shown the ECDSA key: all replicas
// must show the same one. Its key is ECDSA too (it reads no OpenSSH
// Ed25519 key files).
func fleetJSch(t *testing.T, f *fleet, knownHosts string) {
	for _, need := range []struct{ path, pkg string }{{javacBin, "default-jdk-headless"}, {javaBin, "default-jdk-headless"}, {jschJar, "libjsch-java"}} {
		if _, err := os.Stat(need.path); err != nil {
			t.Fatalf("this test needs %s: install the Debian package %s (%v)", need.path, need.pkg, err)
		}
	}
	dir := t.TempDir()
	src, err := filepath.Abs(jschSource)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(javacBin, "-cp", jschJar, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac %s: %v\n%s", src, err, out)
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	addPartnerKey(t, f.st, "acme", priv)
	der, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "id_ecdsa")
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(f.sftpAddr)
	jsch := func(op, local, remote string) string {
		t.Helper()
		cmd := exec.Command(javaBin, "-cp", dir+string(os.PathListSeparator)+jschJar, "JSchClient",
			host, port, "acme", key, knownHosts, op, local, remote, "127.0.0.7")
		cmd.Env = append(os.Environ(), "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("JSch %s %s through HAProxy: %v\n%s", op, remote, err, out)
		}
		return string(out)
	}

	local := filepath.Join(dir, "jsch.csv")
	if err := os.WriteFile(local, payrollFile("J", 200), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := jsch("put", local, "/inbox/jsch.csv"); !strings.Contains(out, "ok host key ecdsa-sha2-nistp256") {
		t.Fatalf("JSch put through HAProxy, want the ECDSA host key:\n%s", out)
	}
	eventually.True(t, 10*time.Second, func() bool { return loggedIn(f, "127.0.0.7", "JSCH") },
		"no replica logged JSch's login from 127.0.0.7: the balancer did not pass its address on")
	direct := replicaResult(t, f.replicas[0], key, "jsch.csv", 60*time.Second)
	got := filepath.Join(dir, "jsch.result.csv")
	jsch("get", got, "/results/jsch.result.csv")
	checkDownload(t, got, direct, "jsch.csv")
}

// fleetPsftp: PuTTY's psftp (what WinSCP is built on) in batch mode
// uploads through the balancer and downloads its result, the host keys
// given as their fingerprints (psftp keeps its own cache, not
// known_hosts), the partner's key converted to PuTTY's format. psftp
// cannot choose its local address: it connects from 127.0.0.1, the address
// the replicas trust for PROXY headers, which is harmless as it is HAProxy
// that connects to the replicas and tells them where psftp came from.
func fleetPsftp(t *testing.T, f *fleet, acmeKey string, hostKeys map[string]string) {
	for _, bin := range []string{psftpBin, puttygenBin} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("this test needs %s: install the Debian package putty-tools (%v)", bin, err)
		}
	}
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		// psftp reads and writes its settings under HOME: the test's own.
		cmd.Env = append(os.Environ(), "HOME="+dir, "SSH_AUTH_SOCK=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ppk := filepath.Join(dir, "acme.ppk")
	run(puttygenBin, acmeKey, "-O", "private", "-o", ppk)
	host, port, _ := net.SplitHostPort(f.sftpAddr)
	args := []string{"-batch", "-i", ppk, "-P", port, "-l", "acme"}
	for _, k := range hostKeys {
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "-hostkey", ssh.FingerprintSHA256(pub))
	}
	psftp := func(script string) {
		t.Helper()
		batch := filepath.Join(dir, "batch")
		if err := os.WriteFile(batch, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		run(psftpBin, append(args, "-b", batch, host)...)
	}

	local := filepath.Join(dir, "psftp.csv")
	if err := os.WriteFile(local, payrollFile("W", 200), 0o644); err != nil {
		t.Fatal(err)
	}
	psftp("put " + local + " /inbox/psftp.csv\n")
	eventually.True(t, 10*time.Second, func() bool { return loggedIn(f, "127.0.0.1", "PuTTY") }, "no replica logged psftp's login")
	direct := replicaResult(t, f.replicas[0], acmeKey, "psftp.csv", 60*time.Second)
	got := filepath.Join(dir, "psftp.result.csv")
	psftp("get /results/psftp.result.csv " + got + "\n")
	checkDownload(t, got, direct, "psftp.csv")
}

// checkDownload checks a result a client downloaded through the balancer:
// byte for byte the one a replica serves directly, every row created.
func checkDownload(t *testing.T, downloaded string, direct []byte, name string) {
	t.Helper()
	got, err := os.ReadFile(downloaded)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, direct) {
		t.Fatalf("the result of %s downloaded through the balancer (%d bytes) differs from the replica's (%d bytes)", name, len(got), len(direct))
	}
	checkResult(t, name, got, 200, "created")
}

func mustSigner(t *testing.T, keyFile string) ssh.Signer {
	t.Helper()
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fleetAllowFrom: a partner's --allow-from, set once with the CLI, holds on
// the replicas for the client's address behind the balancer: OpenSSH from
// 127.0.0.10 logs in, from 127.0.0.9 it is refused exactly like a wrong
// key, and the replica logs the client's address beside the balancer's.
func fleetAllowFrom(t *testing.T, f *fleet, acmeKey, knownHosts string) {
	c := &cli{t: t, url: f.url, dir: t.TempDir()}
	c.ok("partner", "set", "acme", "--allow-from", "127.0.0.10")
	defer c.ok("partner", "set", "acme", "--allow-from", "")
	out, err := openSSHSFTP(t, "127.0.0.9", f.sftpAddr, "acme", acmeKey, knownHosts, "ls /inbox\n").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Permission denied (publickey)") {
		t.Fatalf("sftp from outside the allowlist: %v\n%s", err, out)
	}
	refused := regexp.MustCompile(`msg="login failed" .*remote=127\.0\.0\.9:\d+ proxy=127\.0\.0\.1:\d+ .*allow-from: 127\.0\.0\.9`)
	eventually.True(t, 10*time.Second, func() bool { return f.logged(refused) }, "no replica logged the refusal of 127.0.0.9 (behind the balancer 127.0.0.1) by the allowlist")
	if out, err := openSSHSFTP(t, "127.0.0.10", f.sftpAddr, "acme", acmeKey, knownHosts, "ls /inbox\n").CombinedOutput(); err != nil {
		t.Fatalf("sftp from the allowlist: %v\n%s", err, out)
	}
}

// fleetLockout: eight failed logins from 127.0.0.4 through the balancer
// (SFTP with a key nobody registered, and the reviewer console with a wrong
// password) do not slow or refuse the right logins from 127.0.0.5: the
// replicas see each client's address, not the balancer's.
func fleetLockout(t *testing.T, f *fleet, acmeKey, knownHosts string) {
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	strangerSigner, _ := ssh.NewSignerFromKey(stranger)
	for range 8 {
		c, err := dialFrom("127.0.0.4", f.sftpAddr, &ssh.ClientConfig{User: "acme", Auth: []ssh.AuthMethod{ssh.PublicKeys(strangerSigner)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 30 * time.Second})
		if err == nil {
			c.Close()
			t.Fatal("a key nobody registered logged in")
		}
	}
	start := time.Now()
	if out, err := openSSHSFTP(t, "127.0.0.5", f.sftpAddr, "acme", acmeKey, knownHosts, "ls /results\n").CombinedOutput(); err != nil {
		t.Fatalf("the right login from another address: %v\n%s", err, out)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the right login from 127.0.0.5 took %v after 127.0.0.4's failures: it was slowed as if from the same address", took)
	}

	hash, err := review.HashPassword("right horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.AddReviewer(context.Background(), "alice", hash, nil); err != nil {
		t.Fatal(err)
	}
	post := func(local, name, password string) int {
		tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}).DialContext}
		c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm("http://"+f.httpAddr+"/review/login", neturl.Values{"name": {name}, "password": {password}, "next": {"/review/queue"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		return resp.StatusCode
	}
	// The guesses name another reviewer: a name's own failures lock that
	// name from everywhere (a distributed guess), the address's lock every
	// name from that address only.
	if err := f.st.AddReviewer(context.Background(), "bob", hash, nil); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		if code := post("127.0.0.4", "bob", "wrong"); code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
			t.Fatalf("a wrong password answered %d", code)
		}
	}
	if code := post("127.0.0.4", "alice", "right horse battery staple"); code != http.StatusTooManyRequests {
		t.Fatalf("the address that failed eight times logged in (%d): its failures were not counted against it", code)
	}
	if code := post("127.0.0.5", "alice", "right horse battery staple"); code != http.StatusSeeOther {
		t.Fatalf("the right password from another address answered %d, want 303", code)
	}
	// The replica logs the request under the client's address, the
	// balancer's beside it.
	logged := regexp.MustCompile(`status=303 .*client=127\.0\.0\.5 proxy=127\.0\.0\.1:\d+`)
	eventually.True(t, 10*time.Second, func() bool { return f.logged(logged) }, "no replica logged the login from 127.0.0.5 under its address, with the balancer's as proxy")
}

// listedSize is the size `ls -ln` shows for /inbox/name in the sftp
// client's output.
func listedSize(t *testing.T, out []byte, name string) int64 {
	t.Helper()
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) >= 9 && f[len(f)-1] == "/inbox/"+name {
			n, err := strconv.ParseInt(f[4], 10, 64)
			if err != nil {
				t.Fatalf("ls -ln: size %q: %v", f[4], err)
			}
			return n
		}
	}
	t.Fatalf("ls -ln does not list /inbox/%s:\n%s", name, out)
	return 0
}

// fleetResume uploads a file slowly through the balancer, and once its
// replica is receiving it, kills that replica (SIGKILL: the upload is cut,
// and resumed with reput through the balancer on another replica) or asks
// it to stop (SIGTERM: the upload finishes on it before it exits 0).
// Either way the file received is the partner's, byte for byte, once.
func fleetResume(t *testing.T, f *fleet, acmeKey, knownHosts string, drain bool) {
	name := "cut.csv"
	if drain {
		name = "drained.csv"
	}
	data := payrollFile(strings.ToUpper(name[:1]), 60000) // ~2 MB
	local := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var alive []int
	before := map[int]int{}
	for i, r := range f.replicas {
		if r.alive() {
			alive = append(alive, i)
			before[i] = loginsOf(r)
		}
	}
	// 4 Mbit/s: about four seconds for the file, time to act mid-upload.
	put := openSSHSFTP(t, "127.0.0.6", f.sftpAddr, "acme", acmeKey, knownHosts, "put "+local+" /inbox/"+name+"\n", "-l", "4000")
	var out syncbuf.Buffer
	put.Stdout, put.Stderr = &out, &out
	if err := put.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- put.Wait() }()

	victim := -1
	eventually.NoError(t, 20*time.Second, func() error {
		for _, i := range alive {
			if loginsOf(f.replicas[i]) > before[i] {
				victim = i
				return nil
			}
		}
		return fmt.Errorf("no replica logged the upload's login\n%s", out.String())
	})
	time.Sleep(time.Second) // time must pass: mid-upload, about a quarter is sent
	r := f.replicas[victim]
	if drain {
		r.drain(t)
		if code, _ := r.get("/readyz"); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz of the draining replica answered %d, want 503", code)
		}
		if err := <-done; err != nil {
			t.Fatalf("the upload to a replica given SIGTERM failed: %v\n%s", err, out.String())
		}
		r.waitExit(t, 70*time.Second)
	} else {
		r.kill()
		if err := <-done; err == nil {
			t.Fatalf("the upload went through although its replica was killed mid-way:\n%s", out.String())
		}
		killed := time.Now()
		f.waitBalancer()
		// The partner resumes from any new connection: the balancer sends it
		// to a replica that lives, which offers the size of what the dead
		// one stored at its last checkpoint (reput resumes from the size it
		// is shown), and waits for the dead replica's lease on the upload
		// to run out rather than refusing.
		o, err := openSSHSFTP(t, "127.0.0.6", f.sftpAddr, "acme", acmeKey, knownHosts, "ls -ln /inbox/"+name+"\n").CombinedOutput()
		if err != nil {
			t.Fatalf("ls of the cut upload through the balancer: %v\n%s", err, o)
		}
		offered := listedSize(t, o, name)
		if offered <= 0 || offered >= int64(len(data)) {
			t.Fatalf("after the kill, the cut upload shows %d bytes of %d: the killed replica's checkpoints were not stored\n%s", offered, len(data), o)
		}
		o, err = openSSHSFTP(t, "127.0.0.6", f.sftpAddr, "acme", acmeKey, knownHosts, "reput "+local+" /inbox/"+name+"\n").CombinedOutput()
		if err != nil {
			t.Fatalf("the cut upload could not be resumed through the balancer %v after the kill: %v\n%s", time.Since(killed).Round(100*time.Millisecond), err, o)
		}
		t.Logf("resumed from byte %d of %d, %v after the kill", offered, len(data), time.Since(killed).Round(100*time.Millisecond))
	}

	sum := sha256.Sum256(data)
	eventually.NoError(t, 60*time.Second, func() error {
		rows, err := f.st.Pool().Query(context.Background(),
			`SELECT status, sha256 FROM envelopes WHERE partner_id = 'acme' AND submission_key = $1 AND status <> 'incomplete'`, name)
		if err != nil {
			t.Fatal(err)
		}
		type env struct {
			status string
			sum    []byte
		}
		envs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (env, error) {
			var e env
			return e, r.Scan(&e.status, &e.sum)
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(envs) > 1 {
			t.Fatalf("%s became %d envelopes: %+v", name, len(envs), envs)
		}
		if len(envs) == 1 && envs[0].status == records.StatusProcessed {
			if !bytes.Equal(envs[0].sum, sum[:]) {
				t.Fatalf("%s was received with SHA-256 %x, the partner's file has %x", name, envs[0].sum, sum)
			}
			return nil
		}
		return fmt.Errorf("%s: %+v, not processed", name, envs)
	})
}

// fleetNode: Node's ssh2-sftp-client (what partners' JavaScript uses, on
// ssh2; installed in .ci/npm by .ci/run) uploads from 127.0.0.8 through the
// balancer and downloads its result, trusting only the host keys OpenSSH
// was shown.
func fleetNode(t *testing.T, f *fleet, acmeKey string, hostKeys map[string]string) {
	modules, err := filepath.Abs("../../.ci/npm/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "ssh2-sftp-client")); err != nil {
		t.Fatalf("ssh2-sftp-client is not installed (%v): run .ci/run, or `npm ci` in .ci/npm", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to run ssh2-sftp-client (apt-get install nodejs, as .ci/run does): %v", err)
	}
	var blobs []string
	for _, k := range hostKeys {
		blobs = append(blobs, strings.Fields(k)[1])
	}
	host, port, _ := net.SplitHostPort(f.sftpAddr)
	dir := t.TempDir()
	run := func(op, local, remote string) {
		t.Helper()
		cmd := exec.Command(node, "testdata/ssh2-sftp.js", host, port, "acme", acmeKey, "127.0.0.8",
			strings.Join(blobs, ","), op, local, remote)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok "+op) {
			t.Fatalf("ssh2-sftp-client %s %s through HAProxy: %v\n%s", op, remote, err, out)
		}
	}
	local := filepath.Join(dir, "node.csv")
	if err := os.WriteFile(local, payrollFile("N", 200), 0o644); err != nil {
		t.Fatal(err)
	}
	run("put", local, "/inbox/node.csv")
	eventually.True(t, 10*time.Second, func() bool { return loggedIn(f, "127.0.0.8", "ssh2js") },
		"no replica logged ssh2-sftp-client's login from 127.0.0.8: the balancer did not pass its address on")
	direct := replicaResult(t, f.replicas[0], acmeKey, "node.csv", 60*time.Second)
	got := filepath.Join(dir, "node.result.csv")
	run("get", got, "/results/node.result.csv")
	checkDownload(t, got, direct, "node.csv")
}
