package records

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Statements of sealing.sql.
var (
	sqlSealedWebhookSecrets = query("SealedWebhookSecrets")
	sqlAnythingSealed       = query("AnythingSealed")
)

// Webhook signing secrets are kept sealed: AES-256-GCM under a key that
// lives outside the database (the data dir's secret.key or
// PAYINTAKE_SECRET_KEY, loaded by the binary). A database dump alone gives
// no secret. The sealed form is
//
//	0x01 | key id (8 bytes) | nonce (12 bytes) | ciphertext and tag
//
// with the partner id as additional data, so a sealed secret moved to
// another partner's row does not open.

// SecretKeyLen is the length of a secret key: AES-256.
const SecretKeyLen = 32

const sealVersion = 1

// ErrSecretKeyUnknown: a sealed secret names a key this process does not
// have.
var ErrSecretKeyUnknown = errors.New("sealed with a key this process does not have")

// SecretKeys are the keys that seal and open webhook secrets: the first
// seals, every one opens (old keys stay listed until `payintake secrets
// rotate` has sealed everything again under the first).
type SecretKeys struct {
	keys []secretKey
}

type secretKey struct {
	id   [8]byte
	aead cipher.AEAD
}

// NewSecretKeys builds the key set; keys[0] seals. Each key is
// SecretKeyLen bytes.
func NewSecretKeys(keys ...[]byte) (*SecretKeys, error) {
	if len(keys) == 0 {
		return nil, errors.New("no secret key: give at least one key of 32 bytes")
	}
	ks := &SecretKeys{}
	for i, k := range keys {
		if len(k) != SecretKeyLen {
			return nil, fmt.Errorf("secret key %d is %d bytes, want %d (base64 of 32 random bytes, as `openssl rand -base64 32` prints)", i+1, len(k), SecretKeyLen)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("secret key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secret key %d: %w", i+1, err)
		}
		ks.keys = append(ks.keys, secretKey{id: SecretKeyID(k), aead: aead})
	}
	return ks, nil
}

// ParseSecretKeys reads a key list as PAYINTAKE_SECRET_KEY and secret.key
// hold it: base64 keys separated by commas or line breaks, the sealing key
// first. Lines starting with # are comments.
func ParseSecretKeys(s string) (*SecretKeys, error) {
	var keys [][]byte
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("secret key %d is not base64: %w", len(keys)+1, err)
		}
		keys = append(keys, k)
	}
	return NewSecretKeys(keys...)
}

// FormatSecretKey is the printable form of a key (base64).
func FormatSecretKey(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

// SecretKeyID names a key without revealing it: the first 8 bytes of its
// SHA-256 under a label.
func SecretKeyID(k []byte) [8]byte {
	sum := sha256.Sum256(append([]byte("payintake secret key id\x00"), k...))
	var id [8]byte
	copy(id[:], sum[:8])
	return id
}

// ID is the sealing key's id in hex, as logs and `secrets rotate` show it.
func (ks *SecretKeys) ID() string { return hex.EncodeToString(ks.keys[0].id[:]) }

func (ks *SecretKeys) seal(partner string, plain []byte) ([]byte, error) {
	k := ks.keys[0]
	out := make([]byte, 0, 1+8+12+len(plain)+k.aead.Overhead())
	out = append(out, sealVersion)
	out = append(out, k.id[:]...)
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, plain, []byte(partner)), nil
}

func (ks *SecretKeys) open(partner string, sealed []byte) ([]byte, error) {
	if len(sealed) < 1+8+12 || sealed[0] != sealVersion {
		return nil, errors.New("not a sealed secret of this version")
	}
	id := sealed[1:9]
	for _, k := range ks.keys {
		if string(k.id[:]) != string(id) {
			continue
		}
		ns := k.aead.NonceSize()
		plain, err := k.aead.Open(nil, sealed[9:9+ns], sealed[9+ns:], []byte(partner))
		if err != nil {
			return nil, fmt.Errorf("secret sealed with key %x does not open (altered, or moved from another partner): %w", id, err)
		}
		return plain, nil
	}
	return nil, fmt.Errorf("secret sealed with key %x: %w", id, ErrSecretKeyUnknown)
}

// sealedKeyID is the id of the key a sealed secret names.
func sealedKeyID(sealed []byte) string {
	if len(sealed) < 9 {
		return ""
	}
	return hex.EncodeToString(sealed[1:9])
}

// secretKeyring gives the store its keys, loading them again when a sealed
// secret names a key it does not have (another process rotated them).
type secretKeyring struct {
	load func() (*SecretKeys, error)
	mu   sync.Mutex
	keys *SecretKeys
}

func (r *secretKeyring) current(reload bool) (*SecretKeys, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.load == nil {
		return nil, errors.New("this process has no secret key to seal webhook secrets with: set PAYINTAKE_SECRET_KEY or let the binary create secret.key in --data-dir")
	}
	if r.keys == nil || reload {
		ks, err := r.load()
		if err != nil {
			return nil, fmt.Errorf("load the secret keys: %w", err)
		}
		r.keys = ks
	}
	return r.keys, nil
}

func (s *Store) sealSecret(partner string, plain []byte) ([]byte, error) {
	// Sealing always reads the keys afresh: after a rotation by another
	// process nothing new is sealed under a key it has retired.
	ks, err := s.keys.current(true)
	if err != nil {
		return nil, err
	}
	return ks.seal(partner, plain)
}

func (s *Store) openSecret(partner string, sealed []byte) ([]byte, error) {
	return s.openSealed(partner, fmt.Sprintf("a webhook secret of partner %q", partner), sealed)
}

// openSealed opens what was sealed with additional data ad; what names it
// in the error.
func (s *Store) openSealed(ad, what string, sealed []byte) ([]byte, error) {
	ks, err := s.keys.current(false)
	if err != nil {
		return nil, err
	}
	plain, err := ks.open(ad, sealed)
	if errors.Is(err, ErrSecretKeyUnknown) {
		if ks, err2 := s.keys.current(true); err2 == nil {
			plain, err = ks.open(ad, sealed)
		}
	}
	if errors.Is(err, ErrSecretKeyUnknown) {
		return nil, fmt.Errorf("%s is %w (this process has %s): give every payintake process the same PAYINTAKE_SECRET_KEY or secret.key, keeping retired keys listed until `payintake secrets rotate` has run", what, err, s.keyIDs())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return plain, nil
}

func (s *Store) keyIDs() string {
	ks, err := s.keys.current(false)
	if err != nil {
		return "no key"
	}
	ids := make([]string, len(ks.keys))
	for i, k := range ks.keys {
		ids[i] = hex.EncodeToString(k.id[:])
	}
	return "key " + strings.Join(ids, ", ")
}

// ResealReport says what ResealSecrets sealed again.
type ResealReport struct {
	WebhookSecrets int    // webhook secrets sealed again under the sealing key
	HostKeys       int    // SSH host keys sealed again under it
	PGPKeys        int    // platform OpenPGP secret keys sealed again under it
	KeyID          string // the sealing key
}

// ResealSecrets seals every webhook secret, SSH host key and platform
// OpenPGP secret key sealed under another key than the first again under
// it, all in one transaction (`secrets rotate`). Revoked secrets are sealed
// again too: afterwards a retired key opens nothing.
func (s *Store) ResealSecrets(ctx context.Context) (ResealReport, error) {
	ks, err := s.keys.current(true)
	if err != nil {
		return ResealReport{}, err
	}
	rep := ResealReport{KeyID: ks.ID()}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		if rep.WebhookSecrets, err = resealWebhookSecrets(ctx, tx, ks); err != nil {
			return err
		}
		if rep.HostKeys, err = resealHostKeys(ctx, tx, ks); err != nil {
			return err
		}
		rep.PGPKeys, err = resealPlatformPGPKeys(ctx, tx, ks)
		return err
	})
	return rep, err
}

// HasSealedSecrets reports whether anything is sealed under a secret key
// (webhook secrets, SSH host keys, platform OpenPGP keys): then a process
// without the key must not make a new one.
func (s *Store) HasSealedSecrets(ctx context.Context) (bool, error) {
	var sealed bool
	if err := s.pool.QueryRow(ctx, sqlAnythingSealed).Scan(&sealed); err != nil {
		return false, fmt.Errorf("look for sealed webhook secrets, SSH host keys and OpenPGP keys: %w", err)
	}
	return sealed, nil
}

// CheckWebhookSecrets opens every active webhook secret, so that a process
// started with the wrong key says so at start, not at the first delivery.
func (s *Store) CheckWebhookSecrets(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, sqlSealedWebhookSecrets)
	if err != nil {
		return fmt.Errorf("read webhook secrets: %w", err)
	}
	var partner string
	var sealed []byte
	var openErr error
	_, err = pgx.ForEachRow(rows, []any{&partner, &sealed}, func() error {
		if _, err := s.openSecret(partner, sealed); err != nil && openErr == nil {
			openErr = err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read webhook secrets: %w", err)
	}
	return openErr
}

// resealAll seals again under ks's first key every secret that list (run
// with that key's id) returns as (id, subject, sealed), locked for update,
// writing each back with update (id, sealed); what names the secrets in
// errors and ad gives the associated data of a secret of that subject. It
// returns how many it sealed again.
func (ks *SecretKeys) resealAll(ctx context.Context, tx pgx.Tx, what, list, update string, ad func(subject string) string) (int, error) {
	rows, err := tx.Query(ctx, list, ks.keys[0].id[:])
	if err != nil {
		return 0, fmt.Errorf("read the %ss to seal: %w", what, err)
	}
	type row struct {
		id      int64
		subject string
		sealed  []byte
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.subject, &x.sealed)
	})
	if err != nil {
		return 0, fmt.Errorf("read the %ss to seal: %w", what, err)
	}
	for _, x := range all {
		plain, err := ks.open(ad(x.subject), x.sealed)
		if err != nil {
			return 0, fmt.Errorf("%s %d (%s): %w; list the key it was sealed with (%s) after the new one, then rotate again", what, x.id, x.subject, err, sealedKeyID(x.sealed))
		}
		sealed, err := ks.seal(ad(x.subject), plain)
		if err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, update, x.id, sealed); err != nil {
			return 0, fmt.Errorf("seal %s %d (%s): %w", what, x.id, x.subject, err)
		}
	}
	return len(all), nil
}
