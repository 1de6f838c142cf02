package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultCommitTimeout bounds the commit that records an envelope: a
// database that takes connections but cannot commit (a primary waiting for
// a synchronous standby that is gone) gives the sender "not confirmed, send
// it again" within seconds instead of a close that hangs.
const DefaultCommitTimeout = 10 * time.Second

// ErrCommitUnknown means a commit was not confirmed within its deadline: it
// may have happened or not (a primary waiting for a synchronous standby
// commits locally once the wait is cancelled). Sending the same file again
// is safe either way: its submission key answers with the stored outcome
// (a replay) if it did commit, and records it now if it did not.
var ErrCommitUnknown = errors.New("the database did not confirm the commit in time: its outcome is unknown")

var sqlTakeXactID = query("TakeXactID")

// commitWithin commits tx, waiting at most the store's commit timeout.
func (s *Store) commitWithin(ctx context.Context, tx pgx.Tx) error {
	cctx, cancel := context.WithTimeout(ctx, s.commitTimeout)
	defer cancel()
	err := tx.Commit(cctx)
	// A cancelled wait for a standby answers "committed" with a warning:
	// past the deadline, the outcome is unknown whatever the answer.
	if cctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("record envelope: commit: %w (waited %s)", ErrCommitUnknown, s.commitTimeout)
	}
	if err != nil {
		return fmt.Errorf("record envelope: commit: %w", err)
	}
	return nil
}

// inTxWithin runs f in a transaction committed within the commit timeout.
func (s *Store) inTxWithin(ctx context.Context, f func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("record envelope: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit, a no-op
	if err := f(tx); err != nil {
		return err
	}
	return s.commitWithin(ctx, tx)
}

// CanCommit commits a transaction that has a transaction id (so its commit
// is written and waits for synchronous standbys, as an envelope's does),
// within ctx: what a readiness check needs to know, where a read or an
// empty transaction would succeed on a database that cannot commit.
func (s *Store) CanCommit(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("check commit: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit, a no-op
	if _, err := tx.Exec(ctx, sqlTakeXactID); err != nil {
		return fmt.Errorf("check commit: %w", err)
	}
	err = tx.Commit(ctx)
	if ctx.Err() != nil {
		return fmt.Errorf("check commit: %w", ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("check commit: %w", err)
	}
	return nil
}
