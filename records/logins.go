package records

import (
	"context"
	"fmt"
	"time"
)

// Statements of logins.sql.
var (
	sqlLoginLockedUntil   = query("LoginLockedUntil")
	sqlRecordLoginFailure = query("RecordLoginFailure")
	sqlClearLoginFailures = query("ClearLoginFailures")
	sqlUnlockLogin        = query("UnlockLogin")
)

// Failed reviewer logins are slowed per account name and per client
// address: the first LoginFreeFailures within LoginFailureWindow cost
// nothing more, each later one locks the name and the address for
// LoginLockBase, doubling, at most LoginLockMax. The counts live in the
// database, so every serve process (and the CLI's unlock) sees them.
const (
	LoginFreeFailures  = 3
	LoginLockBase      = time.Second
	LoginLockMax       = 15 * time.Minute
	LoginFailureWindow = time.Hour
)

// LoginLockedUntil returns when the lock on account or address ends (the
// later of the two), or the zero time when neither is locked.
func (s *Store) LoginLockedUntil(ctx context.Context, account, address string) (time.Time, error) {
	var until *time.Time
	err := s.pool.QueryRow(ctx, sqlLoginLockedUntil,
		account, address).Scan(&until)
	if err != nil {
		return time.Time{}, fmt.Errorf("read login failures: %w", err)
	}
	if until == nil {
		return time.Time{}, nil
	}
	return *until, nil
}

// RecordLoginFailure counts a failed login of account from address and
// returns until when they are locked (zero: not locked).
func (s *Store) RecordLoginFailure(ctx context.Context, account, address string) (time.Time, error) {
	var until *time.Time
	// The lock doubles with each failure past the free ones, up to
	// LoginLockMax; the exponent is capped so that a storm of failures
	// never overflows PostgreSQL's interval.
	err := s.pool.QueryRow(ctx, sqlRecordLoginFailure,
		account, address, LoginFailureWindow, LoginFreeFailures, LoginLockBase, LoginLockMax).Scan(&until)
	if err != nil {
		return time.Time{}, fmt.Errorf("record a failed login: %w", err)
	}
	if until == nil {
		return time.Time{}, nil
	}
	return *until, nil
}

// ClearLoginFailures forgets the failures of account and address after a
// successful login.
func (s *Store) ClearLoginFailures(ctx context.Context, account, address string) error {
	if _, err := s.pool.Exec(ctx, sqlClearLoginFailures, account, address); err != nil {
		return fmt.Errorf("clear login failures: %w", err)
	}
	return nil
}

// UnlockLogin lifts the lock and forgets the failures of an account name
// (scope "account") or a client address (scope "address"); it reports
// whether there was anything to forget.
func (s *Store) UnlockLogin(ctx context.Context, scope, key string) (bool, error) {
	tag, err := s.pool.Exec(ctx, sqlUnlockLogin, scope, key)
	if err != nil {
		return false, fmt.Errorf("unlock %s %s: %w", scope, key, err)
	}
	return tag.RowsAffected() > 0, nil
}
