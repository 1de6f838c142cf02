package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/payintake/payintake/records"
)

// Webhook signing secrets are sealed at rest (records/sealing.go) under
// keys kept outside the database: PAYINTAKE_SECRET_KEY (base64 keys
// separated by commas, the sealing key first) or, when that is unset, the
// data dir's secret.key (one base64 key a line, mode 0600), created on first
// use.

const secretKeyEnv = "PAYINTAKE_SECRET_KEY"

// secretKeyFile is where the keys live when PAYINTAKE_SECRET_KEY is unset.
func (g *globals) secretKeyFile() string { return filepath.Join(g.dataDir, "secret.key") }

// secretKeyLoader loads the keys for records.Options.SecretKeys. With
// mayCreate, a missing secret.key is created with a new random key;
// without (the database already holds secrets sealed under some key), a
// missing key is an error that says where the key should come from.
func (g *globals) secretKeyLoader(mayCreate func() bool) func() (*records.SecretKeys, error) {
	return func() (*records.SecretKeys, error) {
		if v := os.Getenv(secretKeyEnv); v != "" {
			ks, err := records.ParseSecretKeys(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", secretKeyEnv, err)
			}
			return ks, nil
		}
		path := g.secretKeyFile()
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			if !mayCreate() {
				return nil, fmt.Errorf("no secret key: %s is unset and %s does not exist, but the database holds webhook secrets or SSH host keys sealed under a key: give this process the key the others use (copy their secret.key, mode 0600, or set %s)", secretKeyEnv, path, secretKeyEnv)
			}
			if err := createSecretKeyFile(path); err != nil {
				return nil, err
			}
			b, err = os.ReadFile(path)
		}
		if err != nil {
			return nil, fmt.Errorf("read the secret key: %w", err)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("%s can be read by other users (mode %04o): run `chmod 600 %s`", path, fi.Mode().Perm(), path)
		}
		ks, err := records.ParseSecretKeys(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return ks, nil
	}
}

// createSecretKeyFile writes a new random key to path, mode 0600; if
// another process created it first, that one is kept.
func createSecretKeyFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create the data dir for the secret key: %w", err)
	}
	k := make([]byte, records.SecretKeyLen)
	if _, err := rand.Read(k); err != nil {
		return fmt.Errorf("generate a secret key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create the secret key: %w", err)
	}
	_, err = f.WriteString(records.FormatSecretKey(k) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write the secret key %s: %w", path, err)
	}
	return nil
}

// writeSecretKeyFile replaces path with keys (the sealing key first),
// atomically, mode 0600.
func writeSecretKeyFile(path string, keys []string) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the new secret key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("install the new secret key: %w", err)
	}
	return nil
}

// cmdSecretsRotate: `secrets rotate` seals every webhook secret and SSH
// host key again under
// a new key. With secret.key it creates the key, lists it first (the old
// ones after it while sealing), seals everything under it, then drops the
// old keys from the file; processes sharing the data dir pick the new key
// up at their next webhook. With PAYINTAKE_SECRET_KEY it seals everything
// under the variable's first key (put the new key first and restart the
// servers before), after which the other keys can be removed from it.
func cmdSecretsRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags, g := newFlagSet("secrets rotate", stderr)
	pos, err := parse(flags, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("use: secrets rotate")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if os.Getenv(secretKeyEnv) != "" {
		rep, err := e.store.ResealSecrets(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d webhook secrets sealed again under key %s (the first of %s), and %d SSH host keys; the other keys can now be removed from it\n",
			rep.WebhookSecrets, rep.KeyID, secretKeyEnv, rep.HostKeys)
		if rep.PGPKeys > 0 {
			fmt.Fprintf(stdout, "%d OpenPGP secret keys sealed again under it\n", rep.PGPKeys)
		}
		return nil
	}
	path := g.secretKeyFile()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read the secret key: %w", err)
	}
	var oldKeys []string
	for _, l := range strings.Split(string(old), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			oldKeys = append(oldKeys, l)
		}
	}
	k := make([]byte, records.SecretKeyLen)
	if _, err := rand.Read(k); err != nil {
		return fmt.Errorf("generate a secret key: %w", err)
	}
	newKey := records.FormatSecretKey(k)
	if err := writeSecretKeyFile(path, append([]string{newKey}, oldKeys...)); err != nil {
		return err
	}
	rep, err := e.store.ResealSecrets(ctx)
	if err != nil {
		return fmt.Errorf("%w (%s now lists the new key first and the old ones after it; run `payintake secrets rotate` again)", err, path)
	}
	if err := writeSecretKeyFile(path, []string{newKey}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d webhook secrets sealed again under the new key %s, and %d SSH host keys; %s holds only it now (%d old keys dropped)\n",
		rep.WebhookSecrets, rep.KeyID, rep.HostKeys, path, len(oldKeys))
	if rep.PGPKeys > 0 {
		fmt.Fprintf(stdout, "%d OpenPGP secret keys sealed again under it\n", rep.PGPKeys)
	}
	return nil
}
