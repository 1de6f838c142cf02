// Package gpgtest gives tests a partner's side of OpenPGP: Debian's GnuPG
// (gpg) in a throw-away home directory, driven as a partner's operator
// drives it (--batch, no passphrase on test keys).
package gpgtest

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// GPG is one GnuPG home.
type GPG struct {
	t    testing.TB
	Home string
}

// New makes an empty GnuPG home, removed (and its agent stopped) when the
// test ends. It fails the test when gpg is not installed: it is in
// scripts/install-deps.sh's test list.
func New(t testing.TB) *GPG {
	t.Helper()
	if _, err := exec.LookPath("gpg"); err != nil {
		t.Fatalf("gpg is not installed (scripts/install-deps.sh test installs gnupg): %v", err)
	}
	// Short: the agent's socket path must fit in a sockaddr_un.
	home, err := os.MkdirTemp("", "gpg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	g := &GPG{t: t, Home: home}
	t.Cleanup(func() {
		_ = exec.Command("gpgconf", "--homedir", home, "--kill", "all").Run()
		_ = os.RemoveAll(home)
	})
	return g
}

// Run runs gpg with args and stdin, failing the test on a non-zero exit.
func (g *GPG) Run(stdin []byte, args ...string) []byte {
	g.t.Helper()
	out, errOut, err := g.Try(stdin, args...)
	if err != nil {
		g.t.Fatalf("gpg %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// Try runs gpg with args and stdin and returns stdout, stderr and the error.
func (g *GPG) Try(stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	all := append([]string{"--homedir", g.Home, "--batch", "--yes", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", "", "--trust-model", "always"}, args...)
	cmd := exec.Command("gpg", all...)
	cmd.Stdin = bytes.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

var fprLine = regexp.MustCompile(`(?m)^fpr:+([0-9A-F]{40,64}):`)

// NewKey makes a key pair for uid: algo "ed25519" (an Ed25519 primary and
// a Cv25519 subkey) or "rsa2048"/"rsa3072"/"rsa4096" (RSA both). It returns
// the primary key's fingerprint.
func (g *GPG) NewKey(uid, algo string) string {
	g.t.Helper()
	enc := "cv25519"
	if strings.HasPrefix(algo, "rsa") {
		enc = algo
	}
	g.Run(nil, "--quick-gen-key", uid, algo, "sign", "never")
	fp := g.Fingerprint(uid)
	g.Run(nil, "--quick-add-key", fp, enc, "encr", "never")
	return fp
}

// Fingerprint returns the fingerprint of the first key matching who.
func (g *GPG) Fingerprint(who string) string {
	g.t.Helper()
	out := g.Run(nil, "--with-colons", "--fingerprint", who)
	m := fprLine.FindSubmatch(out)
	if m == nil {
		g.t.Fatalf("no fingerprint for %q in:\n%s", who, out)
	}
	return string(m[1])
}

// Export returns the armored public key of who.
func (g *GPG) Export(who string) []byte {
	g.t.Helper()
	return g.Run(nil, "--armor", "--export", who)
}

// Import imports keys (a platform's exported public key).
func (g *GPG) Import(keys []byte) {
	g.t.Helper()
	g.Run(keys, "--import")
}
