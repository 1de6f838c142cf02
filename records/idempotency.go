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

// Idempotency-key claims: a door's request claims its key with a lease
// before it works, and completes it with the answer it gave (or releases
// it), as the IETF httpapi Idempotency-Key draft describes for HTTP. The
// store knows nothing of the door: the answer is a StoredAnswer.

// StoredAnswer is what a door answered to the request that settled a key —
// an idempotency key, a webhook-id, a leg replay's key — kept verbatim so that a repeat of the
// request gets the same bytes (principle 2).
//
// The store keeps it as three opaque values and never reads them: Code and
// Format are the door's own labels of Body, Body is the answer's bytes.
// The HTTP door (intake/httpapi) puts its status code and media type there
// and converts its response to and from this type; the store knows no HTTP.
// The answer is written in the transaction that settles its key — given to
// CompleteIdempotencyKey, or asked for by DeliverWebhook's WebhookAnswerFunc
// and Replay's ReplayAnswerFunc inside their transaction — so a key never
// commits without its answer, nor an answer without its key (principle 3).
// The columns keep their names (response_status, response_type,
// response_body): answers stored before this type existed are given again
// unchanged (leg replays' answers, which kept no format, got theirs, JSON,
// from a migration).
type StoredAnswer struct {
	Code   int    // the door's code for the answer (HTTP: the status)
	Format string // what Body is (HTTP: the media type)
	Body   []byte // the answer, verbatim
}

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
	Fingerprint []byte // of the request that completed the key
	Answer      StoredAnswer
	EnvelopeID  int64 // the submission the key was answered with; 0: none
}

// ClaimIdempotencyKey claims partner's key for owner with a lease, insert-or-nothing:
// of concurrent claims exactly one wins. An in-progress claim whose lease has
// expired, or whose submission (the envelope under the same submission key)
// is processed, is taken over. key must already be normalised (SubmissionKey).
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
	// Take over a claim whose holder stopped renewing its lease (it
	// crashed), or whose submission is already processed: the holder that
	// recorded it may have died with it and the queue finished its work
	// (the answer is the envelope's, whoever gives it), so a retry gets it
	// as soon as it exists rather than when the lease runs out.
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
		Scan(&status, &c.Fingerprint, &code, &ctype, &c.Answer.Body, &env)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, errClaimVanished
	}
	if err != nil {
		return c, fmt.Errorf("read idempotency key: %w", err)
	}
	c.Status = *status
	if code != nil {
		c.Answer.Code = int(*code)
	}
	if ctype != nil {
		c.Answer.Format = *ctype
	}
	if env != nil {
		c.EnvelopeID = *env
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

// CompleteIdempotencyKey stores owner's answer with its claim (fingerprint:
// of the request's body; envelope: the submission it answered with, 0 for
// none) and marks the key done, in one statement. It reports false when the
// claim was taken over meanwhile (the other holder completes it).
func (s *Store) CompleteIdempotencyKey(ctx context.Context, partner, key string, owner, fingerprint []byte, envelope int64, ans StoredAnswer) (bool, error) {
	var env *int64
	if envelope != 0 {
		env = &envelope
	}
	tag, err := s.pool.Exec(ctx, sqlCompleteIdempotencyKey,
		partner, key, owner, fingerprint, ans.Code, ans.Format, ans.Body, env)
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
