package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// A hostile reader of the database (a dump, a backup, a read-only role)
// finds no webhook secret: secrets are sealed from the start, secret.key is
// created 0600, and `secrets rotate` moves every secret to a new key, in the
// data dir and in PAYINTAKE_SECRET_KEY.
func TestHostileSecretsAtRest(t *testing.T) {
	ctx := context.Background()
	t.Setenv(secretKeyEnv, "")
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	data := filepath.Join(c.dir, "data")
	c.ok("partner", "add", "acme", "--data-dir", data)
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var issued [][]byte // oldest first
	for range 2 {
		out := c.ok("partner", "webhook-secret", "acme", "--data-dir", data)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		k, err := records.ParseWebhookSecret(lines[len(lines)-1])
		if err != nil {
			t.Fatalf("webhook-secret printed %q: %v", out, err)
		}
		issued = append(issued, k)
	}
	older, fresh := issued[0], issued[1]
	keyFile := filepath.Join(data, "secret.key")
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret.key: %v %v, want mode 0600", fi, err)
	}
	var dump string
	if err := conn.QueryRow(ctx, `SELECT string_agg(encode(sealed, 'hex'), ' ') FROM webhook_secrets`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	plain := 0
	for _, k := range issued {
		if strings.Contains(dump, hex.EncodeToString(k)) {
			plain++
		}
	}
	if dump == "" || plain != 0 {
		t.Fatalf("%d secrets readable in the table %q", plain, dump)
	}
	open := func(keys string) ([][]byte, error) {
		ks, err := records.ParseSecretKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		st, err := records.Open(ctx, c.url, records.Options{SecretKeys: func() (*records.SecretKeys, error) { return ks, nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		return st.WebhookSecrets(ctx, "acme")
	}
	k1, _ := os.ReadFile(keyFile)
	if got, err := open(string(k1)); err != nil || len(got) != 2 || !bytes.Equal(got[0], fresh) || !bytes.Equal(got[1], older) {
		t.Fatalf("secrets under secret.key: %x %v", got, err)
	}

	// Wrong key in the environment: adding a secret is refused, saying why.
	t.Setenv(secretKeyEnv, records.FormatSecretKey(bytes.Repeat([]byte{1}, 32)))
	code, _, errs := c.run("partner", "webhook-secret", "acme", "--data-dir", data)
	if code == 0 || !strings.Contains(errs, "does not have") || !strings.Contains(errs, secretKeyEnv) {
		t.Errorf("wrong key: exit %d: %s", code, errs)
	}
	t.Setenv(secretKeyEnv, "")

	// Rotation in the data dir.
	out := c.ok("secrets", "rotate", "--data-dir", data)
	k2, _ := os.ReadFile(keyFile)
	if !strings.Contains(out, "2 webhook secrets sealed again") || bytes.Equal(k1, k2) || strings.Count(strings.TrimSpace(string(k2)), "\n") != 0 {
		t.Fatalf("rotate: %q; secret.key before %q after %q", out, k1, k2)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret.key after rotation: %v %v", fi, err)
	}
	if got, err := open(string(k2)); err != nil || len(got) != 2 || !bytes.Equal(got[0], fresh) {
		t.Errorf("secrets under the new key: %x %v", got, err)
	}
	if _, err := open(string(k1)); err == nil || !strings.Contains(err.Error(), "does not have") {
		t.Errorf("the retired key still opens the secrets: %v", err)
	}

	// Rotation in PAYINTAKE_SECRET_KEY: the new key first, the old after it.
	k3 := records.FormatSecretKey(bytes.Repeat([]byte{3}, 32))
	t.Setenv(secretKeyEnv, k3+","+strings.TrimSpace(string(k2)))
	out = c.ok("secrets", "rotate", "--data-dir", data)
	if !strings.Contains(out, "2 webhook secrets sealed again") {
		t.Errorf("rotate in the environment: %q", out)
	}
	if got, err := open(k3); err != nil || len(got) != 2 || !bytes.Equal(got[1], older) {
		t.Errorf("secrets under the environment's new key: %x %v", got, err)
	}
	t.Logf("SUMMARY secrets-at-rest: %d of 2 webhook secrets readable in the table; wrong key refused; rotated twice (secret.key, %s), the retired key opens nothing",
		plain, secretKeyEnv)
}
