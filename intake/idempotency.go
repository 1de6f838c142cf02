package intake

import (
	"context"
	"time"

	"github.com/payintake/payintake/records"
)

// Idempotency keys of a door (the HTTP Idempotency-Key): a request claims
// its key with a lease before it works, renews the lease while it works,
// and completes the key with its answer, or releases it when nothing was
// decided. The keys are the store's (records/idempotency.go); a key is
// given here as the client sent it and normalised as every submission key
// is (SubmissionKey).

// Answer is what a door answered, stored with a completed key and given
// back verbatim to a repeat: the door's code and format of the body, and
// the body (see records.StoredAnswer: the store never reads them).
type Answer = records.StoredAnswer

// KeyClaim is what ClaimKey found or did.
type KeyClaim = records.IdemClaim

// KeyInProgress is the state of a key another request holds under a live
// lease.
const KeyInProgress = records.IdemInProgress

// ClaimKey claims partner's key for owner with a lease, insert-or-nothing:
// of concurrent claims exactly one wins; an in-progress claim whose lease
// expired is taken over.
func (in *Intake) ClaimKey(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (KeyClaim, error) {
	return in.Store.ClaimIdempotencyKey(ctx, partner, SubmissionKey(key), owner, lease)
}

// RenewKey extends owner's lease on a key it still works on; false: the
// claim is no longer owner's.
func (in *Intake) RenewKey(ctx context.Context, partner, key string, owner []byte, lease time.Duration) (bool, error) {
	return in.Store.RenewIdempotencyLease(ctx, partner, SubmissionKey(key), owner, lease)
}

// CompleteKey stores owner's answer with the key (fingerprint: the SHA-256
// of the request's body; envelope: the submission it answered with, 0 for
// none) and marks it done; false: the claim was taken over meanwhile (the
// other holder completes it).
func (in *Intake) CompleteKey(ctx context.Context, partner, key string, owner, fingerprint []byte, envelope int64, ans Answer) (bool, error) {
	return in.Store.CompleteIdempotencyKey(ctx, partner, SubmissionKey(key), owner, fingerprint, envelope, ans)
}

// ReleaseKey drops owner's in-progress claim (nothing was decided), so a
// retry can claim the key at once.
func (in *Intake) ReleaseKey(ctx context.Context, partner, key string, owner []byte) error {
	return in.Store.ReleaseIdempotencyKey(ctx, partner, SubmissionKey(key), owner)
}

// ReapKeys deletes keys completed more than retention ago, batch per
// statement, and returns how many it deleted; the submissions are kept.
func (in *Intake) ReapKeys(ctx context.Context, retention time.Duration, batch int) (int64, error) {
	return in.Store.ReapIdempotencyKeys(ctx, retention, batch)
}
