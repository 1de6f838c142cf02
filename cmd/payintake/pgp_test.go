package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgp/gpgtest"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// TestPGPCommands: the platform's keys are made, listed, exported (GnuPG
// imports what partners are given) and retired by the CLI; partner set
// registers a partner's key, keeping the replaced one, and sets its policy;
// ingest of a gpg-encrypted file writes the sealed result that gpg opens.
func TestPGPCommands(t *testing.T) {
	t.Setenv(secretKeyEnv, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	if code, _, errs := c.run("pgp", "key", "export"); code == 0 || !strings.Contains(errs, "pgp key create") {
		t.Errorf("export before any key: exit %d %q", code, errs)
	}
	out := c.ok("pgp", "key", "create")
	first := fingerprintIn(t, out)
	out = c.ok("pgp", "key", "create", "--rsa")
	second := fingerprintIn(t, out)
	list := c.ok("pgp", "key", "list")
	if !strings.Contains(list, second+"  rsa4096") || !strings.Contains(list, first+"  ed25519/cv25519") ||
		strings.Index(list, second) > strings.Index(list, first) || !strings.Contains(list, "signs, decrypts") {
		t.Errorf("list:\n%s", list)
	}
	g := gpgtest.New(t)
	g.Import([]byte(c.ok("pgp", "key", "export")))
	if g.Fingerprint(first) != first || g.Fingerprint(second) != second {
		t.Error("gpg does not hold both exported keys")
	}
	c.ok("pgp", "key", "retire", strings.ToLower(first))
	if code, _, errs := c.run("pgp", "key", "retire", first); code == 0 || !strings.Contains(errs, "no active OpenPGP key") {
		t.Errorf("retire twice: exit %d %q", code, errs)
	}
	if exp := c.ok("pgp", "key", "export"); strings.Count(exp, "BEGIN PGP PUBLIC KEY BLOCK") != 1 {
		t.Errorf("export after retiring one of two:\n%s", exp)
	}

	c.ok("partner", "add", "acme")
	old := g.NewKey("Acme old <old@acme.example>", "ed25519")
	c.ok("partner", "set", "acme", "--pgp-key", c.file("old.asc", string(g.Export(old))), "--pgp", "require")
	fp := g.NewKey("Acme <ops@acme.example>", "ed25519")
	c.ok("partner", "set", "acme", "--pgp-key", c.file("acme.asc", string(g.Export(fp))))
	var ps []records.Partner
	if err := json.Unmarshal([]byte(c.ok("partner", "list", "--format", "json")), &ps); err != nil || len(ps) != 1 || ps[0].PGP != records.PGPRequire {
		t.Errorf("partner list: %+v %v, want pgp require", ps, err)
	}
	st, err := records.Open(context.Background(), c.url, records.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys, err := st.PartnerPGPKeys(context.Background(), "acme", true)
	if err != nil || len(keys) != 2 || keys[0].Fingerprint != fp || keys[0].ReplacedAt != nil || keys[1].Fingerprint != old || keys[1].ReplacedAt == nil {
		t.Errorf("partner keys with history: %+v %v", keys, err)
	}

	plain := "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,10.00,USD\n"
	enc := g.Run([]byte(plain), "--encrypt", "--sign", "--local-user", fp, "--recipient", second)
	results := filepath.Join(c.dir, "results")
	out = c.ok("ingest", "--partner", "acme", "--results-dir", results, c.file("pay.csv.gpg", string(enc)))
	if !strings.Contains(out, "created=1") {
		t.Fatalf("ingest: %s", out)
	}
	sealed, err := os.ReadFile(filepath.Join(results, "pay.result.csv.pgp"))
	if err != nil {
		t.Fatal(err)
	}
	res, status, err := g.Try(sealed, "--status-fd", "2", "--decrypt")
	if err != nil || !strings.Contains(string(res), ",created,") || !strings.Contains(string(status), "VALIDSIG "+second) {
		t.Errorf("gpg --decrypt of the result: %v\n%s\n%s", err, res, status)
	}
}

func fingerprintIn(t *testing.T, out string) string {
	t.Helper()
	for _, f := range strings.Fields(out) {
		if len(f) == 40 && strings.ToUpper(f) == f {
			return f
		}
	}
	t.Fatalf("no fingerprint in %q", out)
	return ""
}
