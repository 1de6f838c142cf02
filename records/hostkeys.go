package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of hostkeys.sql.
var (
	sqlAddHostKey                   = query("AddHostKey")
	sqlHostKeys                     = query("HostKeys")
	sqlLockHostKeys                 = query("LockHostKeys")
	sqlRetireActiveHostKeysWithNext = query("RetireActiveHostKeysWithNext")
	sqlActivateNextHostKeys         = query("ActivateNextHostKeys")
	sqlRetireActiveHostKey          = query("RetireActiveHostKey")
	sqlActivateHostKey              = query("ActivateHostKey")
	sqlSealedHostKeys               = query("SealedHostKeys")
	sqlResealHostKey                = query("ResealHostKey")
)

// The SFTP door's SSH host keys live here, not in a server's data dir, so
// that every server on the database shows partners the same keys. The
// store keeps them opaque: a type, a fingerprint and the key's bytes, the
// private half sealed like webhook secrets (sealing.go) under its
// fingerprint, so a sealed key copied onto another row does not open.

// HostKeyState is where a host key is in its life.
type HostKeyState string

// A key is announced to clients while next, served while active, and kept
// (never served) once retired.
const (
	HostKeyNext    HostKeyState = "next"
	HostKeyActive  HostKeyState = "active"
	HostKeyRetired HostKeyState = "retired"
)

// HostKey is one SSH host key.
type HostKey struct {
	ID          int64
	Type        string // the SSH key format: ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa
	State       HostKeyState
	Fingerprint string // SHA256:…, as ssh-keygen -l prints it
	PublicKey   []byte // SSH wire format
	Private     []byte // the private key (OpenSSH PEM), opened
	Origin      string // how it came: generated, or the file it was imported from
	CreatedAt   time.Time
	ActivatedAt *time.Time
	RetiredAt   *time.Time
}

func hostKeyAD(fingerprint string) string { return "ssh host key " + fingerprint }

// HostKeys returns every host key, oldest first, private halves opened.
func (s *Store) HostKeys(ctx context.Context) ([]HostKey, error) {
	rows, err := s.pool.Query(ctx, sqlHostKeys)
	if err != nil {
		return nil, fmt.Errorf("read SSH host keys: %w", err)
	}
	type row struct {
		HostKey
		sealed []byte
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		var state string
		err := r.Scan(&x.ID, &x.Type, &state, &x.Fingerprint, &x.PublicKey, &x.sealed, &x.Origin,
			&x.CreatedAt, &x.ActivatedAt, &x.RetiredAt)
		x.State = HostKeyState(state)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("read SSH host keys: %w", err)
	}
	keys := make([]HostKey, len(all))
	for i, x := range all {
		x.Private, err = s.openSealed(hostKeyAD(x.Fingerprint), fmt.Sprintf("SSH host key %s", x.Fingerprint), x.sealed)
		if err != nil {
			return nil, err
		}
		keys[i] = x.HostKey
	}
	return keys, nil
}

// AddHostKey stores k in k.State (next or active) unless a key of its type
// is in that state already or k itself is stored; it reports whether it
// stored k. Servers starting at once may each offer a key: one of each
// type is kept, and every server reads back the same.
func (s *Store) AddHostKey(ctx context.Context, k HostKey) (bool, error) {
	if k.State != HostKeyNext && k.State != HostKeyActive {
		return false, fmt.Errorf("add SSH host key: state %q: a key is added as next or active", k.State)
	}
	sealed, err := s.sealSecret(hostKeyAD(k.Fingerprint), k.Private)
	if err != nil {
		return false, fmt.Errorf("seal SSH host key %s: %w", k.Fingerprint, err)
	}
	tag, err := s.pool.Exec(ctx, sqlAddHostKey, k.Type, string(k.State), k.Fingerprint, k.PublicKey, sealed, k.Origin)
	if err != nil {
		return false, fmt.Errorf("store SSH host key %s: %w", k.Fingerprint, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ActivateHostKey makes k the active key of its type at once, retiring the
// one it replaces, in one transaction; k is stored if it is not yet.
func (s *Store) ActivateHostKey(ctx context.Context, k HostKey) error {
	sealed, err := s.sealSecret(hostKeyAD(k.Fingerprint), k.Private)
	if err != nil {
		return fmt.Errorf("seal SSH host key %s: %w", k.Fingerprint, err)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockHostKeys); err != nil {
			return fmt.Errorf("lock SSH host keys: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlRetireActiveHostKey, k.Type, k.Fingerprint); err != nil {
			return fmt.Errorf("retire the active %s host key: %w", k.Type, err)
		}
		if _, err := tx.Exec(ctx, sqlActivateHostKey, k.Type, k.Fingerprint, k.PublicKey, sealed, k.Origin); err != nil {
			return fmt.Errorf("activate SSH host key %s: %w", k.Fingerprint, err)
		}
		return nil
	})
}

// ErrNoNextHostKey: there is no next key to promote.
var ErrNoNextHostKey = errors.New("no next SSH host key to promote")

// PromoteHostKeys makes every next key active and retires the active key
// of its type, in one transaction, and returns the fingerprints promoted.
func (s *Store) PromoteHostKeys(ctx context.Context) ([]string, error) {
	var promoted []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockHostKeys); err != nil {
			return fmt.Errorf("lock SSH host keys: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlRetireActiveHostKeysWithNext); err != nil {
			return fmt.Errorf("retire the active host keys: %w", err)
		}
		rows, err := tx.Query(ctx, sqlActivateNextHostKeys)
		if err != nil {
			return fmt.Errorf("promote the next host keys: %w", err)
		}
		promoted, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("promote the next host keys: %w", err)
		}
		if len(promoted) == 0 {
			return ErrNoNextHostKey
		}
		return nil
	})
	return promoted, err
}

// resealHostKeys seals every host key sealed under another key than the
// sealing one again under it, in tx; it returns how many it sealed again.
func resealHostKeys(ctx context.Context, tx pgx.Tx, ks *SecretKeys) (int, error) {
	return ks.resealAll(ctx, tx, "SSH host key", sqlSealedHostKeys, sqlResealHostKey, hostKeyAD)
}
