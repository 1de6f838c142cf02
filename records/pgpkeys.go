package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of pgpkeys.sql.
var (
	sqlAddPlatformPGPKey        = query("AddPlatformPGPKey")
	sqlPlatformPGPKeys          = query("PlatformPGPKeys")
	sqlActivePlatformPGPSecrets = query("ActivePlatformPGPSecrets")
	sqlRetirePlatformPGPKey     = query("RetirePlatformPGPKey")
	sqlPlatformPGPKeysToReseal  = query("PlatformPGPKeysToReseal")
	sqlResealPlatformPGPKey     = query("ResealPlatformPGPKey")
	sqlReplacePartnerPGPKeys    = query("ReplacePartnerPGPKeys")
	sqlAddPartnerPGPKey         = query("AddPartnerPGPKey")
	sqlPartnerPGPKeys           = query("PartnerPGPKeys")
)

// OpenPGP policies of a partner (Partner.PGP).
const (
	PGPOff     = "off"     // files are read as they come; an OpenPGP file is refused
	PGPAccept  = "accept"  // OpenPGP files are decrypted and verified, plain files read
	PGPRequire = "require" // only files encrypted to the platform and signed by the partner
)

// PlatformPGPKey is one of the platform's OpenPGP key pairs, without its
// secret (PlatformPGPSecrets opens those).
type PlatformPGPKey struct {
	Fingerprint string     `json:"fingerprint"`
	Algorithm   string     `json:"algorithm"`
	PublicKey   string     `json:"public_key"` // armored
	CreatedAt   time.Time  `json:"created_at"`
	RetiredAt   *time.Time `json:"retired_at,omitempty"`
}

// pgpKeyAD binds a sealed platform secret key to its fingerprint: a
// sealed key copied to another row does not open.
func pgpKeyAD(fp string) string { return "pgp platform key " + fp }

// AddPlatformPGPKey stores a new platform key pair, its secret sealed under
// the secret key. Being the newest, it signs from now on; the older ones
// still decrypt until retired.
func (s *Store) AddPlatformPGPKey(ctx context.Context, k PlatformPGPKey, secret []byte) error {
	sealed, err := s.sealSecret(pgpKeyAD(k.Fingerprint), secret)
	if err != nil {
		return fmt.Errorf("seal the OpenPGP secret key %s: %w", k.Fingerprint, err)
	}
	if _, err := s.pool.Exec(ctx, sqlAddPlatformPGPKey, k.Fingerprint, k.Algorithm, k.PublicKey, sealed, k.CreatedAt); err != nil {
		return fmt.Errorf("store OpenPGP key %s: %w", k.Fingerprint, err)
	}
	return nil
}

// resealPlatformPGPKeys seals every platform secret key sealed under
// another key than ks's first again under it (secrets rotate), in tx.
func resealPlatformPGPKeys(ctx context.Context, tx pgx.Tx, ks *SecretKeys) (int, error) {
	return ks.resealAll(ctx, tx, "OpenPGP secret key", sqlPlatformPGPKeysToReseal, sqlResealPlatformPGPKey, pgpKeyAD)
}

// PlatformPGPKeys lists the platform's keys: the active ones newest first
// (the first signs), then the retired ones.
func (s *Store) PlatformPGPKeys(ctx context.Context) ([]PlatformPGPKey, error) {
	rows, err := s.pool.Query(ctx, sqlPlatformPGPKeys)
	if err != nil {
		return nil, fmt.Errorf("list OpenPGP keys: %w", err)
	}
	ks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PlatformPGPKey, error) {
		var k PlatformPGPKey
		return k, r.Scan(&k.Fingerprint, &k.Algorithm, &k.PublicKey, &k.CreatedAt, &k.RetiredAt)
	})
	if err != nil {
		return nil, fmt.Errorf("list OpenPGP keys: %w", err)
	}
	return ks, nil
}

// PlatformPGPSecrets opens the secret keys of the active platform keys,
// newest (the signing one) first.
func (s *Store) PlatformPGPSecrets(ctx context.Context) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, sqlActivePlatformPGPSecrets)
	if err != nil {
		return nil, fmt.Errorf("read OpenPGP secret keys: %w", err)
	}
	var fp string
	var sealed []byte
	var out [][]byte
	_, err = pgx.ForEachRow(rows, []any{&fp, &sealed}, func() error {
		k, err := s.openSealed(pgpKeyAD(fp), "OpenPGP secret key "+fp, sealed)
		if err != nil {
			return err
		}
		out = append(out, k)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read OpenPGP secret keys: %w", err)
	}
	return out, nil
}

// RetirePlatformPGPKey stops a key from decrypting (and signing), from the
// next file on. ErrNotFound: no active key has this fingerprint.
func (s *Store) RetirePlatformPGPKey(ctx context.Context, fp string) error {
	tag, err := s.pool.Exec(ctx, sqlRetirePlatformPGPKey, fp)
	if err != nil {
		return fmt.Errorf("retire OpenPGP key %s: %w", fp, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("active OpenPGP key %s: %w", fp, ErrNotFound)
	}
	return nil
}

// PartnerPGPKey is one of a partner's OpenPGP public keys.
type PartnerPGPKey struct {
	Fingerprint string     `json:"fingerprint"`
	UserID      string     `json:"user_id"`
	PublicKey   string     `json:"public_key"` // armored
	AddedAt     time.Time  `json:"added_at"`
	ReplacedAt  *time.Time `json:"replaced_at,omitempty"`
}

// PartnerPGPKeys lists a partner's OpenPGP public keys, the current ones
// newest first (results are encrypted to the first), then, with history,
// the replaced ones.
func (s *Store) PartnerPGPKeys(ctx context.Context, partner string, history bool) ([]PartnerPGPKey, error) {
	rows, err := s.pool.Query(ctx, sqlPartnerPGPKeys, partner, history)
	if err != nil {
		return nil, fmt.Errorf("read OpenPGP keys of partner %q: %w", partner, err)
	}
	ks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PartnerPGPKey, error) {
		var k PartnerPGPKey
		return k, r.Scan(&k.Fingerprint, &k.UserID, &k.PublicKey, &k.AddedAt, &k.ReplacedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("read OpenPGP keys of partner %q: %w", partner, err)
	}
	return ks, nil
}

// setPartnerPGPKeys makes keys the partner's current OpenPGP keys: the
// others are marked replaced (kept, for the history), these added.
func setPartnerPGPKeys(ctx context.Context, tx pgx.Tx, id string, keys []PartnerPGPKey) error {
	if len(keys) == 0 {
		return errors.New("no OpenPGP public key given")
	}
	fps := make([]string, len(keys))
	for i, k := range keys {
		fps[i] = k.Fingerprint
	}
	if _, err := tx.Exec(ctx, sqlReplacePartnerPGPKeys, id, fps); err != nil {
		return fmt.Errorf("replace OpenPGP keys of partner %q: %w", id, err)
	}
	// In reverse: the first given is the newest (ids ascend).
	for i := len(keys) - 1; i >= 0; i-- {
		k := keys[i]
		if _, err := tx.Exec(ctx, sqlAddPartnerPGPKey, id, k.Fingerprint, k.UserID, k.PublicKey); err != nil {
			return fmt.Errorf("add OpenPGP key %s of partner %q: %w", k.Fingerprint, id, err)
		}
	}
	return nil
}
