package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/intake/sftpd"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// hostKeyFile writes a new private host key of typ and returns its path
// and fingerprint.
func hostKeyFile(t *testing.T, dir, name, typ string) (string, string) {
	t.Helper()
	k, err := sftpd.GenerateHostKey(typ)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, k.Private, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, k.Fingerprint
}

// The operator's side of a rotation: import a key partners know, add a
// next key, print known_hosts lines, promote; secrets rotate seals the host
// keys again under the new secret key.
func TestHostKeyCLI(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	dd := []string{"--data-dir", c.dir}
	list := func() []hostKeyView {
		t.Helper()
		out := c.ok(append([]string{"hostkey", "list", "--format", "json"}, dd...)...)
		if strings.Contains(out, "PRIVATE") {
			t.Fatalf("hostkey list shows a private key:\n%s", out)
		}
		var v []hostKeyView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	states := func() map[string]string {
		m := map[string]string{}
		for _, k := range list() {
			m[k.Fingerprint] = k.State
		}
		return m
	}
	if v := list(); len(v) != 0 {
		t.Fatalf("keys before any serve: %+v", v)
	}
	if code, _, errs := c.run(append([]string{"hostkey", "known-hosts", "sftp.example.com"}, dd...)...); code != 1 || !strings.Contains(errs, "no SSH host keys yet") {
		t.Fatalf("known-hosts without keys: exit %d %q", code, errs)
	}

	old, oldFP := hostKeyFile(t, c.dir, "old_key", ssh.KeyAlgoED25519)
	c.ok(append([]string{"hostkey", "import", old, "--activate"}, dd...)...)
	if v := list(); len(v) != 1 || v[0].State != "active" || v[0].Fingerprint != oldFP || v[0].Origin != "imported from "+old {
		t.Fatalf("after import --activate: %+v", v)
	}

	out := c.ok(append([]string{"hostkey", "rotate", "--type", "ed25519"}, dd...)...)
	var nextFP string
	for fp, st := range states() {
		if st == "next" {
			nextFP = fp
		}
	}
	if nextFP == "" || !strings.Contains(out, nextFP) {
		t.Fatalf("rotate added no next key: %v\n%s", states(), out)
	}
	if out := c.ok(append([]string{"hostkey", "rotate", "--type", "ed25519"}, dd...)...); !strings.Contains(out, "announced already") || len(list()) != 2 {
		t.Fatalf("a second rotate: %s", out)
	}
	other, _ := hostKeyFile(t, c.dir, "other_key", ssh.KeyAlgoED25519)
	if code, _, errs := c.run(append([]string{"hostkey", "import", other}, dd...)...); code != 1 || !strings.Contains(errs, "next ssh-ed25519 key is announced already") {
		t.Fatalf("import beside a next key: exit %d %q", code, errs)
	}
	kh := c.ok(append([]string{"hostkey", "known-hosts", "sftp.example.com:2022"}, dd...)...)
	if lines := strings.Split(strings.TrimSpace(kh), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "[sftp.example.com]:2022 ssh-ed25519 ") {
		t.Fatalf("known-hosts:\n%s", kh)
	}

	c.ok(append([]string{"hostkey", "rotate", "--promote"}, dd...)...)
	if s := states(); s[oldFP] != "retired" || s[nextFP] != "active" {
		t.Fatalf("after promote: %v", s)
	}
	if code, _, errs := c.run(append([]string{"hostkey", "rotate", "--promote"}, dd...)...); code != 1 || !strings.Contains(errs, "no next SSH host key") {
		t.Fatalf("promote with nothing next: exit %d %q", code, errs)
	}

	if out := c.ok(append([]string{"secrets", "rotate"}, dd...)...); !strings.Contains(out, "and 2 SSH host keys") {
		t.Fatalf("secrets rotate: %s", out)
	}
	if s := states(); len(s) != 2 {
		t.Fatalf("after secrets rotate the keys do not open: %v", s)
	}

	if code, _, _ := c.run(append([]string{"hostkey", "rotate", "--type", "dsa"}, dd...)...); code != 2 {
		t.Fatalf("rotate --type dsa: exit %d", code)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(p384)
	bad := c.file("p384.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})))
	if code, _, errs := c.run(append([]string{"hostkey", "import", bad}, dd...)...); code != 1 || !strings.Contains(errs, "P-256") {
		t.Fatalf("import of a P-384 key: exit %d %q", code, errs)
	}
}
