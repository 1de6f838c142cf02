package intake

import (
	"context"
	"time"

	"github.com/payintake/payintake/records"
)

// Answer is what a door answered under a key (a webhook-id, a leg
// replay's key), stored with it and given back verbatim to a repeat: the
// door's code and format of the body, and the body (see
// records.StoredAnswer: the store never reads them).
type Answer = records.StoredAnswer

// Idempotency-Key leases (the HTTP door's): a request leases its key
// before it reads its body, renews the lease while it works and releases it
// when it ends, so that a second request with the key is told it is in
// progress rather than racing the first. The lease is only that: what a
// key's bytes get — the first outcome, a key reuse — is decided by Submit,
// as for every door (records.Receive's submission key). A key is given
// here as the client sent it and normalised as every submission key is
// (SubmissionKey).

// KeyLease is what LeaseKey did.
type KeyLease = records.KeyLease

// LeaseKey leases partner's key to owner for lease, insert-or-nothing: of
// concurrent requests exactly one gets it. A lease that ran out (its
// holder died), or whose submission is processed, is taken over.
func (in *Intake) LeaseKey(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (KeyLease, error) {
	return in.Store.LeaseIdempotencyKey(ctx, partner, SubmissionKey(key), owner, lease)
}

// RenewKey extends owner's lease on a key it still works on; false: the
// lease is no longer owner's.
func (in *Intake) RenewKey(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (bool, error) {
	return in.Store.RenewIdempotencyLease(ctx, partner, SubmissionKey(key), owner, lease)
}

// ReleaseKey ends owner's lease (its request ended), so the next request
// with the key leases it at once.
func (in *Intake) ReleaseKey(ctx context.Context, partner, key string, owner []byte) error {
	return in.Store.ReleaseIdempotencyKey(ctx, partner, SubmissionKey(key), owner)
}

// ReapKeys deletes leases that ran out more than retention ago (their
// requests died and were never retried), batch per statement, and returns
// how many it deleted; the submissions, and so the keys' answers, are kept.
func (in *Intake) ReapKeys(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	return in.Store.ReapIdempotencyKeys(ctx, retention, batch)
}
