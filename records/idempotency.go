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
	sqlLeaseIdempotencyKey   = query("LeaseIdempotencyKey")
	sqlRenewIdempotencyLease = query("RenewIdempotencyLease")
	sqlReleaseIdempotencyKey = query("ReleaseIdempotencyKey")
	sqlReapIdempotencyKeys   = query("ReapIdempotencyKeys")
)

// Idempotency-Key leases: while a request of a door works on a submission
// key (reading its body, receiving, processing), it holds a lease on the
// key, so that another request with the key is told the key is in progress
// instead of racing it. A lease decides nothing about the key's bytes or
// its outcome: Receive does that, with the submission key (the same bytes:
// the first outcome; other bytes: idempotency_key_reuse). The lease ends
// with the request (ReleaseIdempotencyKey), whatever it answered; one left
// by a request that died runs out and is taken over.

// StoredAnswer is what a door answered to the request that settled a key —
// a webhook-id, a leg replay's key — kept verbatim so that a repeat of the
// request gets the same bytes (principle 2).
//
// The store keeps it as three opaque values and never reads them: Code and
// Format are the door's own labels of Body, Body is the answer's bytes.
// The HTTP door (intake/httpapi) puts its status code and media type there
// and converts its response to and from this type; the store knows no HTTP.
// The answer is written in the transaction that settles its key — asked
// for by DeliverWebhook's WebhookAnswerFunc and Replay's ReplayAnswerFunc
// inside their transaction — so a key never commits without its answer,
// nor an answer without its key (principle 3). The columns keep their
// names (response_status, response_type, response_body): answers stored
// before this type existed are replayed unchanged (replays, which kept no
// format, got theirs, JSON).
type StoredAnswer struct {
	Code   int    // the door's code for the answer (HTTP: the status)
	Format string // what Body is (HTTP: the media type)
	Body   []byte // the answer, verbatim
}

// KeyLease is what LeaseIdempotencyKey did.
type KeyLease struct {
	// Leased: the caller now holds the key and must release it when its
	// request ends. False: another request holds it under a live lease.
	Leased bool
	// TakenOver: the key was leased from a holder whose lease ran out, or
	// whose submission is processed already.
	TakenOver bool
}

// LeaseIdempotencyKey leases partner's key to owner, insert-or-nothing:
// of concurrent requests exactly one gets it. A lease that ran out, or
// whose submission (the envelope under the same submission key) is
// processed, is taken over: the holder may have died after recording it
// and the queue finished its work, so a retry gets the answer as soon as
// it exists rather than when the lease runs out. key must already be
// normalised (SubmissionKey).
func (s *Store) LeaseIdempotencyKey(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (KeyLease, error) {
	var l KeyLease
	err := s.pool.QueryRow(ctx, sqlLeaseIdempotencyKey, partner, key, owner, lease).Scan(&l.TakenOver)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("lease idempotency key: %w", err)
	}
	l.Leased = true
	return l, nil
}

// RenewIdempotencyLease extends owner's lease on a key it is still working
// on. It reports false when the lease is no longer owner's.
func (s *Store) RenewIdempotencyLease(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, sqlRenewIdempotencyLease, partner, key, owner, lease)
	if err != nil {
		return false, fmt.Errorf("renew idempotency lease: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseIdempotencyKey ends owner's lease (its request ended), so the
// next request with the key leases it at once. A lease taken over
// meanwhile is the new holder's and stays.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, partner, key string, owner []byte) error {
	_, err := s.pool.Exec(ctx, sqlReleaseIdempotencyKey, partner, key, owner)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// ReapIdempotencyKeys deletes leases older than retention that ran out
// (left by requests that died and never retried), batch rows per statement
// so no long lock is held, and returns how many it deleted. A lease still
// live is left alone, however old. The submissions are kept: the key's
// answer is the submission's, with or without a lease.
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
