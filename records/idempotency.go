package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of idempotency.sql.
var (
	sqlClaimIdempotencyKey    = query("ClaimIdempotencyKey")
	sqlTakeOverIdempotencyKey = query("TakeOverIdempotencyKey")
	sqlReadIdempotencyKey     = query("ReadIdempotencyKey")
	sqlRenewIdempotencyLease  = query("RenewIdempotencyLease")
	sqlCompleteIdempotencyKey = query("CompleteIdempotencyKey")
	sqlReleaseIdempotencyKey  = query("ReleaseIdempotencyKey")
	sqlReapIdempotencyKeys    = query("ReapIdempotencyKeys")
)

// Idempotency-Key claims (IETF httpapi Idempotency-Key draft).

// Idempotency key states.
const (
	IdemInProgress = "in_progress"
	IdemDone       = "done"
)

// IdemClaim is what ClaimIdempotencyKey found or did.
type IdemClaim struct {
	// Claimed: the caller now owns the key (a new claim, or a takeover of an
	// in-progress claim whose lease had expired) and must complete or release it.
	Claimed   bool
	TakenOver bool
	// Otherwise the key's state: in progress under another live lease, or done.
	Status      string
	Fingerprint []byte
	Response    IdemResponse
}

// IdemResponse is a stored response, replayed verbatim.
type IdemResponse struct {
	Status      int
	ContentType string
	Body        []byte
	EnvelopeID  int64
}

// ClaimIdempotencyKey claims partner's key for owner with a lease, insert-or-nothing:
// of concurrent claims exactly one wins. An in-progress claim whose lease has
// expired is taken over. key must already be normalised (SubmissionKey).
func (s *Store) ClaimIdempotencyKey(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (IdemClaim, error) {
	for range 5 {
		c, err := s.claimIdempotencyKey(ctx, partner, key, owner, lease)
		if !errors.Is(err, errClaimVanished) {
			return c, err
		}
	}
	return IdemClaim{}, fmt.Errorf("claim idempotency key: it keeps being released by other requests; try again")
}

// errClaimVanished: the key was released (or reaped) between our statements.
var errClaimVanished = errors.New("idempotency key vanished")

func (s *Store) claimIdempotencyKey(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (IdemClaim, error) {
	var c IdemClaim
	leaseArg := lease
	err := s.pool.QueryRow(ctx, sqlClaimIdempotencyKey, partner, key, owner, leaseArg).Scan(&c.Claimed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("claim idempotency key: %w", err)
	}
	if c.Claimed {
		return c, nil
	}
	// Take over a claim whose holder stopped renewing its lease (it crashed).
	err = s.pool.QueryRow(ctx, sqlTakeOverIdempotencyKey, partner, key, owner, leaseArg).Scan(&c.Claimed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("take over idempotency key: %w", err)
	}
	if c.Claimed {
		c.TakenOver = true
		return c, nil
	}
	var status, ctype *string
	var code *int32
	var env *int64
	err = s.pool.QueryRow(ctx, sqlReadIdempotencyKey, partner, key).
		Scan(&status, &c.Fingerprint, &code, &ctype, &c.Response.Body, &env)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, errClaimVanished
	}
	if err != nil {
		return c, fmt.Errorf("read idempotency key: %w", err)
	}
	c.Status = *status
	if code != nil {
		c.Response.Status = int(*code)
	}
	if ctype != nil {
		c.Response.ContentType = *ctype
	}
	if env != nil {
		c.Response.EnvelopeID = *env
	}
	return c, nil
}

// RenewIdempotencyLease extends owner's lease on a key it is still working on.
// It reports false when the claim is no longer owner's.
func (s *Store) RenewIdempotencyLease(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, sqlRenewIdempotencyLease,
		partner, key, owner, lease)
	if err != nil {
		return false, fmt.Errorf("renew idempotency lease: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// CompleteIdempotencyKey stores the response for owner's claim and marks the
// key done. It reports false when the claim was taken over meanwhile (the
// other holder completes it).
func (s *Store) CompleteIdempotencyKey(ctx context.Context, partner, key string, owner, fingerprint []byte, resp IdemResponse) (bool, error) {
	var env *int64
	if resp.EnvelopeID != 0 {
		env = &resp.EnvelopeID
	}
	tag, err := s.pool.Exec(ctx, sqlCompleteIdempotencyKey,
		partner, key, owner, fingerprint, resp.Status, resp.ContentType, resp.Body, env)
	if err != nil {
		return false, fmt.Errorf("complete idempotency key: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseIdempotencyKey drops owner's in-progress claim (the request failed
// before anything was decided), so a retry can claim the key at once.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, partner, key string, owner []byte) error {
	_, err := s.pool.Exec(ctx, sqlReleaseIdempotencyKey, partner, key, owner)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// ReapIdempotencyKeys deletes keys created more than retention ago, batch
// rows per statement so no long lock is held, and returns how many it
// deleted. A key still in progress under a live lease is left alone. The
// submissions themselves are kept: a key reused after reaping is still
// recognised by the submission key (same bytes: the first result again;
// other bytes: rejected).
func (s *Store) ReapIdempotencyKeys(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, sqlReapIdempotencyKeys, retention, batch)
		if err != nil {
			return total, fmt.Errorf("reap idempotency keys: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}
