package records

import (
	"context"
	"fmt"
	"time"
)

// Statements of partnersshkeys.sql.
var (
	sqlAddPartnerKey    = query("AddPartnerKey")
	sqlRevokePartnerKey = query("RevokePartnerKey")
	sqlKeyAllowed       = query("KeyAllowed")
)

// PartnerKey is one SSH public key a partner may log in with.
type PartnerKey struct {
	ID          int64
	PartnerID   string
	Fingerprint string // SHA256:...
	PublicKey   string // authorized_keys line
	Comment     string
	CreatedAt   time.Time
}

// AddPartnerKey registers a public key for a partner. Adding a key that is
// already active is not an error; adding a revoked one reactivates it.
func (s *Store) AddPartnerKey(ctx context.Context, k PartnerKey) error {
	_, err := s.pool.Exec(ctx, sqlAddPartnerKey, k.PartnerID, k.Fingerprint, k.PublicKey, k.Comment)
	if err != nil {
		return fmt.Errorf("add key for partner %q: %w", k.PartnerID, err)
	}
	return nil
}

// RevokePartnerKey stops a key from logging in, from the next login on.
func (s *Store) RevokePartnerKey(ctx context.Context, partner, fingerprint string) error {
	tag, err := s.pool.Exec(ctx, sqlRevokePartnerKey, partner, fingerprint)
	if err != nil {
		return fmt.Errorf("revoke key for partner %q: %w", partner, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("key %s of partner %q: %w", fingerprint, partner, ErrNotFound)
	}
	return nil
}

// KeyAllowed reports whether partner may log in with the key of this fingerprint.
// It is asked at every login, so keys are added and revoked without a restart.
func (s *Store) KeyAllowed(ctx context.Context, partner, fingerprint string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, sqlKeyAllowed, partner, fingerprint).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check key of partner %q: %w", partner, err)
	}
	return ok, nil
}
