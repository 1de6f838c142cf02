package records_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func testKey(label string) []byte {
	k := sha256.Sum256([]byte(label))
	return k[:]
}

func storeWithKeys(t *testing.T, url string, keys ...[]byte) *records.Store {
	t.Helper()
	st, err := records.Open(context.Background(), url, records.Options{SecretKeys: func() (*records.SecretKeys, error) {
		return records.NewSecretKeys(keys...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// tableBytes is everything webhook_secrets holds, as hex, as a dump would.
func tableBytes(t *testing.T, st *records.Store) string {
	t.Helper()
	var s string
	if err := st.Pool().QueryRow(context.Background(), `SELECT coalesce(string_agg(encode(sealed, 'hex'), ''), '')
		FROM webhook_secrets`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Webhook secrets are sealed at rest: the database holds no plaintext and
// takes no row without its sealed secret, a process with another key says
// which key it lacks, a sealed secret moved to another partner does not
// open, and rotation seals everything under the new key.
func TestWebhookSecretsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	k1, k2 := testKey("k1"), testKey("k2")
	st := storeWithKeys(t, url, k1)
	for _, p := range []string{"acme", "globex"} {
		if err := st.AddPartner(ctx, records.Partner{ID: p, Name: p}); err != nil {
			t.Fatal(err)
		}
	}
	var secrets [][]byte // oldest first
	for range 2 {
		printable, err := st.AddWebhookSecret(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		k, err := records.ParseWebhookSecret(printable)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, k)
	}
	older, newer := secrets[0], secrets[1]
	dump := tableBytes(t, st)
	if len(dump) == 0 {
		t.Fatal("webhook_secrets is empty: the test proves nothing")
	}
	for name, k := range map[string][]byte{"older": older, "newer": newer, "key": k1} {
		if strings.Contains(dump, hex.EncodeToString(k)) {
			t.Errorf("the %s secret is in webhook_secrets in plain text", name)
		}
	}
	if _, err := st.Pool().Exec(ctx, `INSERT INTO webhook_secrets (partner_id) VALUES ('acme')`); err == nil {
		t.Error("a webhook secret row without its sealed secret was stored")
	}
	got, err := st.WebhookSecrets(ctx, "acme")
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], newer) || !bytes.Equal(got[1], older) {
		t.Fatalf("secrets of acme: %x %v, want the newer and the older one", got, err)
	}

	// Another key: a clear error naming the key that is missing.
	wrong := storeWithKeys(t, url, k2)
	_, err = wrong.WebhookSecrets(ctx, "acme")
	id1 := records.SecretKeyID(k1)
	if !errors.Is(err, records.ErrSecretKeyUnknown) || !strings.Contains(err.Error(), hex.EncodeToString(id1[:])) ||
		!strings.Contains(err.Error(), "PAYINTAKE_SECRET_KEY") {
		t.Errorf("wrong key: %v", err)
	}
	if err := wrong.CheckWebhookSecrets(ctx); !errors.Is(err, records.ErrSecretKeyUnknown) {
		t.Errorf("check with the wrong key: %v", err)
	}
	if _, err := wrong.ResealSecrets(ctx); err == nil || !strings.Contains(err.Error(), "list the key") {
		t.Errorf("rotate with the wrong key: %v", err)
	}

	// Rotation: k2 seals, k1 still opens; afterwards k2 alone opens all,
	// the SSH host keys and platform OpenPGP keys sealed beside the secrets
	// too.
	if _, err := st.AddHostKey(ctx, hostKey("ssh-ed25519", "a", records.HostKeyActive)); err != nil {
		t.Fatal(err)
	}
	pgpSecret := []byte("pgp secret key")
	if err := st.AddPlatformPGPKey(ctx, records.PlatformPGPKey{Fingerprint: strings.Repeat("AB", 20), Algorithm: "test",
		PublicKey: "public", CreatedAt: time.Now()}, pgpSecret); err != nil {
		t.Fatal(err)
	}
	rot := storeWithKeys(t, url, k2, k1)
	rep, err := rot.ResealSecrets(ctx)
	if err != nil || rep.WebhookSecrets != 2 || rep.HostKeys != 1 || rep.PGPKeys != 1 {
		t.Fatalf("rotate: %+v %v, want 2 webhook secrets, 1 host key and 1 OpenPGP key sealed again", rep, err)
	}
	if rep, err := rot.ResealSecrets(ctx); err != nil || rep.WebhookSecrets != 0 {
		t.Fatalf("rotate again under the same key: %+v %v, want none sealed again", rep, err)
	}
	after := storeWithKeys(t, url, k2)
	got, err = after.WebhookSecrets(ctx, "acme")
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], newer) || !bytes.Equal(got[1], older) {
		t.Fatalf("after rotation: %x %v", got, err)
	}
	if keys, err := after.HostKeys(ctx); err != nil || len(keys) != 1 || string(keys[0].Private) != "private a" {
		t.Fatalf("host keys after rotation: %+v %v", keys, err)
	}
	if got, err := after.PlatformPGPSecrets(ctx); err != nil || len(got) != 1 || !bytes.Equal(got[0], pgpSecret) {
		t.Fatalf("OpenPGP secret keys after rotation: %q %v", got, err)
	}
	if _, err := st.WebhookSecrets(ctx, "acme"); !errors.Is(err, records.ErrSecretKeyUnknown) {
		t.Errorf("the retired key still opens: %v", err)
	}
	if _, err := st.HostKeys(ctx); !errors.Is(err, records.ErrSecretKeyUnknown) {
		t.Errorf("the retired key still opens the host keys: %v", err)
	}
	if _, err := st.PlatformPGPSecrets(ctx); !errors.Is(err, records.ErrSecretKeyUnknown) || !strings.Contains(err.Error(), "OpenPGP secret key") {
		t.Errorf("the retired key still opens the OpenPGP keys: %v", err)
	}

	// A sealed secret moved to another partner's row does not open.
	if _, err := st.Pool().Exec(ctx, `UPDATE webhook_secrets SET partner_id = 'globex' WHERE id = (SELECT min(id) FROM webhook_secrets)`); err != nil {
		t.Fatal(err)
	}
	if _, err := after.WebhookSecrets(ctx, "globex"); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Errorf("moved secret: %v", err)
	}
}

func TestSecretKeysParse(t *testing.T) {
	if _, err := records.ParseSecretKeys("c2hvcnQ="); err == nil || !strings.Contains(err.Error(), "32") {
		t.Errorf("short key: %v", err)
	}
	if _, err := records.ParseSecretKeys("not base64!"); err == nil || !strings.Contains(err.Error(), "base64") {
		t.Errorf("bad base64: %v", err)
	}
	ks, err := records.ParseSecretKeys("# comment\n" + records.FormatSecretKey(testKey("a")) + "\n," + records.FormatSecretKey(testKey("b")) + "\n")
	id := records.SecretKeyID(testKey("a"))
	if err != nil || ks.ID() != hex.EncodeToString(id[:]) {
		t.Errorf("list: %v %v", ks, err)
	}
}
