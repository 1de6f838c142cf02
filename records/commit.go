package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// (a repeat) if it did commit, and records it now if it did not.
var ErrCommitUnknown = errors.New("the database did not confirm the commit in time: its outcome is unknown")

var sqlCommitCheck = query("CommitCheck")

// commitWithin commits tx (recording what), waiting at most the store's
// commit timeout.
func (s *Store) commitWithin(ctx context.Context, tx pgx.Tx, what string) error {
	cctx, cancel := context.WithTimeout(ctx, s.commitTimeout)
	defer cancel()
	err := tx.Commit(cctx)
	// A cancelled wait for a standby answers "committed" with a warning:
	// past the deadline, the outcome is unknown whatever the answer.
	if cctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: commit: %w (waited %s)", what, ErrCommitUnknown, s.commitTimeout)
	}
	if err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// inTxWithin runs f in a transaction committed within the commit timeout.
func (s *Store) inTxWithin(ctx context.Context, what string, f func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit, a no-op
	if err := f(tx); err != nil {
		return err
	}
	return s.commitWithin(ctx, tx, what)
}

// execWithin runs one statement on its own (its commit bounded by the
// commit timeout, as inTxWithin's).
func (s *Store) execWithin(ctx context.Context, what, sql string, args ...any) (pgconn.CommandTag, error) {
	cctx, cancel := context.WithTimeout(ctx, s.commitTimeout)
	defer cancel()
	tag, err := s.pool.Exec(cctx, sql, args...)
	if cctx.Err() != nil && ctx.Err() == nil {
		return tag, fmt.Errorf("%s: %w (waited %s)", what, ErrCommitUnknown, s.commitTimeout)
	}
	if err != nil {
		return tag, fmt.Errorf("%s: %w", what, err)
	}
	return tag, nil
}

// CanCommit commits a transaction that writes (a transactional WAL message,
// which touches no table: its commit is flushed and waits for synchronous
// standbys, as an envelope's does), within ctx: what a readiness check
// needs to know, where a read, an empty transaction or one that only took
// a transaction id would succeed on a database that cannot commit.
func (s *Store) CanCommit(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("check commit: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after a commit, a no-op
	if _, err := tx.Exec(ctx, sqlCommitCheck); err != nil {
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
