package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// selfSigned writes a certificate for 127.0.0.1 named cn, and its key, to
// dir/cn.pem and dir/cn.key, and returns the certificate.
func selfSigned(t *testing.T, dir, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile := func(name string, block *pem.Block) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(cn+".pem", &pem.Block{Type: "CERTIFICATE", Bytes: der})
	writeFile(cn+".key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keepAlive is one HTTP/1.1 connection over TLS, kept open between requests.
type keepAlive struct {
	t    *testing.T
	conn *tls.Conn
	r    *bufio.Reader
}

func dialTLS(t *testing.T, addr string, roots *x509.CertPool) *keepAlive {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &keepAlive{t: t, conn: c, r: bufio.NewReader(c)}
}

func (k *keepAlive) peer() string {
	return k.conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func (k *keepAlive) get(path string) (int, error) {
	if _, err := k.conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return res.StatusCode, err
}

func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("/usr/bin/curl", append([]string{"-sS", "--max-time", "20"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var setCookieRE = regexp.MustCompile(`(?mi)^set-cookie: payintake_review=[^\r\n]*`)

// TestServeTLSReload: serve --tls-cert/--tls-key answers HTTPS (Go's client
// and curl, as partners use it). After the files are replaced and SIGHUP
// sent, a keep-alive connection opened before goes on with the old
// certificate while new connections get the new one. The review cookie is
// Secure over HTTPS.
func TestServeTLSReload(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Fatalf("this test needs curl: install the Debian package curl (%v)", err)
	}
	dir := t.TempDir()
	one, two := selfSigned(t, dir, "one"), selfSigned(t, dir, "two")
	cert, key := filepath.Join(dir, "serve.pem"), filepath.Join(dir, "serve.key")
	install := func(cn string) {
		for src, dst := range map[string]string{cn + ".pem": cert, cn + ".key": key} {
			b, err := os.ReadFile(filepath.Join(dir, src))
			if err != nil {
				t.Fatal(err)
			}
			// As a renewal does: a new file renamed over the old one.
			if err := os.WriteFile(dst+".new", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dst+".new", dst); err != nil {
				t.Fatal(err)
			}
		}
	}
	install("one")
	roots := x509.NewCertPool()
	roots.AddCert(one)
	roots.AddCert(two)

	url, data := pgtest.New(t), t.TempDir()
	stdout, stderr, stop := startServe(t, "--database-url", url, "--data-dir", data, "--sftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--workers", "0", "--demo", "--tls-cert", cert, "--tls-key", key)
	addr := waitFor(t, stderr, regexp.MustCompile(`msg="http listening" addr=(\S+) tls=true`))
	password := waitFor(t, stdout, regexp.MustCompile(`password \(shown once\): (\S+)`))
	waitFor(t, stdout, regexp.MustCompile(`(?m)^  (https://`+regexp.QuoteMeta(addr)+`/review/)$`))

	old := dialTLS(t, addr, roots)
	if st, err := old.get("/healthz"); err != nil || st != http.StatusOK || old.peer() != "one" {
		t.Fatalf("first connection: %d %v, certificate %s", st, err, old.peer())
	}
	if out := curl(t, "--cacert", filepath.Join(dir, "one.pem"), "https://"+addr+"/healthz"); out != "ok\n" {
		t.Errorf("curl over HTTPS: %q", out)
	}
	if _, err := tls.Dial("tcp", addr, &tls.Config{}); err == nil {
		t.Error("a client that does not trust the certificate connected")
	}

	install("two")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stderr, regexp.MustCompile(`msg="tls certificate (reloaded)" subject="CN=two"`))

	if st, err := old.get("/healthz"); err != nil || st != http.StatusOK || old.peer() != "one" {
		t.Errorf("the keep-alive connection after the reload: %d %v, certificate %s", st, err, old.peer())
	}
	fresh := dialTLS(t, addr, roots)
	if st, err := fresh.get("/healthz"); err != nil || st != http.StatusOK || fresh.peer() != "two" {
		t.Errorf("a new connection after the reload: %d %v, certificate %s", st, err, fresh.peer())
	}
	if out := curl(t, "--cacert", filepath.Join(dir, "two.pem"), "https://"+addr+"/healthz"); out != "ok\n" {
		t.Errorf("curl with the new certificate: %q", out)
	}

	// A bad pair on the next SIGHUP: logged, the served certificate kept.
	if err := os.WriteFile(key, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stderr, regexp.MustCompile(`msg="(tls certificate not reloaded)`))
	if out := curl(t, "--cacert", filepath.Join(dir, "two.pem"), "https://"+addr+"/healthz"); out != "ok\n" {
		t.Errorf("curl after a failed reload: %q", out)
	}

	login := curl(t, "-i", "--cacert", filepath.Join(dir, "two.pem"), "-d", "name=demo-reviewer", "--data-urlencode", "password="+password,
		"-d", "next=/review/queue", "https://"+addr+"/review/login")
	c := setCookieRE.FindString(login)
	if c == "" || !strings.Contains(c, "; Secure") {
		t.Errorf("session cookie over HTTPS: %q, want Secure\n%s", c, login)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, stderr)
	}
}

// TestServeBehindProxyHTTP: with --trusted-proxies, a request from the
// proxy (curl bound to 127.0.0.2) is logged as its X-Forwarded-For client
// and gets a Secure cookie when X-Forwarded-Proto says https; the same
// headers from an untrusted source (127.0.0.1) change nothing.
func TestServeBehindProxyHTTP(t *testing.T) {
	url, data := pgtest.New(t), t.TempDir()
	stdout, stderr, _ := startServe(t, "--database-url", url, "--data-dir", data, "--sftp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--workers", "0", "--demo", "--trusted-proxies", "127.0.0.2/32")
	addr := waitFor(t, stderr, regexp.MustCompile(`msg="http listening" addr=(\S+) tls=false trusted_proxies=127\.0\.0\.2/32`))
	password := waitFor(t, stdout, regexp.MustCompile(`password \(shown once\): (\S+)`))
	login := func(from, proto string) string {
		return setCookieRE.FindString(curl(t, "-i", "--interface", from, "-H", "X-Forwarded-For: 198.51.100.4", "-H", "X-Forwarded-Proto: "+proto,
			"-d", "name=demo-reviewer", "--data-urlencode", "password="+password, "-d", "next=/review/queue", "http://"+addr+"/review/login"))
	}
	if c := login("127.0.0.2", "https"); c == "" || !strings.Contains(c, "; Secure") {
		t.Errorf("through the trusted proxy, X-Forwarded-Proto https: cookie %q, want Secure", c)
	}
	if c := login("127.0.0.2", "http"); c == "" || strings.Contains(c, "Secure") {
		t.Errorf("through the trusted proxy, X-Forwarded-Proto http: cookie %q, want not Secure", c)
	}
	if c := login("127.0.0.1", "https"); c == "" || strings.Contains(c, "Secure") {
		t.Errorf("from an untrusted source claiming https: cookie %q, want not Secure", c)
	}
	waitFor(t, stderr, regexp.MustCompile(`(route=/review/login .*client=198\.51\.100\.4 proxy=127\.0\.0\.2:\d+)`))
	waitFor(t, stderr, regexp.MustCompile(`(?m)(route=/review/login .*client=127\.0\.0\.1)$`))

	// systemctl reload (ExecReload sends SIGHUP) does not stop a serve
	// without TLS.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stderr, regexp.MustCompile(`msg="SIGHUP: (nothing to reload)`))
	if out := curl(t, "http://"+addr+"/healthz"); out != "ok\n" {
		t.Errorf("after SIGHUP: %q", out)
	}
}
