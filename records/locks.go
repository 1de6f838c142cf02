package records

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of locks.sql.
var (
	sqlLockPeriod          = query("LockPeriod")
	sqlLockPeriodRecords   = query("LockPeriodRecords")
	sqlUnlockPeriod        = query("UnlockPeriod")
	sqlUnlockPeriodRecords = query("UnlockPeriodRecords")
	sqlRecordUnlock        = query("RecordUnlock")
	sqlLockEvents          = query("LockEvents")
)

// Lock reasons for records and periods.
const (
	LockApproved = "approved"
	LockPaid     = "paid"
)

// LockPeriod closes a partner's pay period: its records are locked and it
// takes no new natural keys. Locking again with another reason (approved,
// then paid) updates the reason. It returns how many records are locked.
func (s *Store) LockPeriod(ctx context.Context, partner, period, reason, by string) (int64, error) {
	period = strings.ToUpper(strings.TrimSpace(period))
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := PartnerLock(ctx, tx, partner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlLockPeriod, partner, period, reason, by); err != nil {
			return fmt.Errorf("lock period %s of partner %q: %w", period, partner, err)
		}
		tag, err := tx.Exec(ctx, sqlLockPeriodRecords, partner, period, reason)
		if err != nil {
			return fmt.Errorf("lock records of period %s: %w", period, err)
		}
		n = tag.RowsAffected()
		return nil
	})
	return n, err
}

// ErrNotLocked is returned when unlocking a period that is not locked.
var ErrNotLocked = errors.New("period is not locked")

// UnlockPeriod reopens a locked pay period for an authorised correction: the
// period lock is removed and its records are unlocked, and the unlock is
// recorded with who and why. Open exceptions of the period stay open. It
// returns how many records were unlocked.
func (s *Store) UnlockPeriod(ctx context.Context, partner, period, by, reason string) (int64, error) {
	period = strings.ToUpper(strings.TrimSpace(period))
	by, reason = strings.TrimSpace(by), strings.TrimSpace(reason)
	if by == "" || reason == "" {
		return 0, errors.New("an unlock needs who does it and why (--by and --reason)")
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := PartnerLock(ctx, tx, partner); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sqlUnlockPeriod, partner, period)
		if err != nil {
			return fmt.Errorf("unlock period %s of partner %q: %w", period, partner, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("period %s of partner %s: %w", period, partner, ErrNotLocked)
		}
		tag, err = tx.Exec(ctx, sqlUnlockPeriodRecords, partner, period)
		if err != nil {
			return fmt.Errorf("unlock records of period %s: %w", period, err)
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, sqlRecordUnlock, partner, period, reason, by, n)
		if err != nil {
			return fmt.Errorf("record the unlock: %w", err)
		}
		return nil
	})
	return n, err
}

// LockEvent is one lock or unlock of a period.
type LockEvent struct {
	ID        int64     `json:"id"`
	PartnerID string    `json:"partner"`
	PayPeriod string    `json:"pay_period"`
	Action    string    `json:"action"` // lock, unlock
	Reason    string    `json:"reason"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	Records   *int64    `json:"records,omitempty"`
}

// LockEvents lists the lock history of a partner's period (all periods if
// period is empty), oldest first.
func (s *Store) LockEvents(ctx context.Context, partner, period string) ([]LockEvent, error) {
	rows, err := s.pool.Query(ctx, sqlLockEvents, partner, strings.TrimSpace(period))
	if err != nil {
		return nil, fmt.Errorf("list lock events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LockEvent, error) {
		var e LockEvent
		err := r.Scan(&e.ID, &e.PartnerID, &e.PayPeriod, &e.Action, &e.Reason, &e.By, &e.At, &e.Records)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list lock events: %w", err)
	}
	return evs, nil
}
