package records

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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
		if err := partnerLock(ctx, tx, partner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO period_locks (partner_id, pay_period, reason, locked_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT (partner_id, pay_period) DO UPDATE SET reason = EXCLUDED.reason,
				locked_by = EXCLUDED.locked_by, locked_at = now()`, partner, period, reason, by); err != nil {
			return fmt.Errorf("lock period %s of partner %q: %w", period, partner, err)
		}
		tag, err := tx.Exec(ctx, `UPDATE records SET locked_reason = $3, locked_at = now()
			WHERE partner_id = $1 AND pay_period = $2`, partner, period, reason)
		if err != nil {
			return fmt.Errorf("lock records of period %s: %w", period, err)
		}
		n = tag.RowsAffected()
		return nil
	})
	return n, err
}

// Record is the current version of one business fact.
type Record struct {
	ID           int64     `json:"id"`
	PartnerID    string    `json:"partner"`
	EmployeeRef  string    `json:"employee_ref"`
	EmployeeID   string    `json:"employee_id"` // from the employee mapping every record has
	PayPeriod    string    `json:"pay_period"`
	Component    string    `json:"component"`
	Amount       string    `json:"amount"`
	Currency     string    `json:"currency"`
	Hours        string    `json:"hours"`
	Rate         string    `json:"rate"`
	PayDate      string    `json:"pay_date"`
	Version      int       `json:"version"`
	LockedReason string    `json:"locked_reason"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// FindRecord reads the current version of a record by its natural key, or ErrNotFound.
func (s *Store) FindRecord(ctx context.Context, partner, employee, period, component string) (Record, error) {
	var r Record
	err := s.pool.QueryRow(ctx, `
		SELECT r.id, r.partner_id, r.employee_ref, e.employee_id, r.pay_period, r.component, r.amount::text, r.currency,
			coalesce(r.hours::text, ''), coalesce(r.rate::text, ''), coalesce(r.pay_date::text, ''),
			r.version, coalesce(r.locked_reason, ''), r.updated_at
		FROM records r JOIN employees e ON e.partner_id = r.partner_id AND e.employee_ref = r.employee_ref
		WHERE r.partner_id = $1 AND r.employee_ref = $2 AND r.pay_period = $3 AND r.component = $4`,
		partner, employee, period, component).Scan(&r.ID, &r.PartnerID, &r.EmployeeRef, &r.EmployeeID, &r.PayPeriod, &r.Component,
		&r.Amount, &r.Currency, &r.Hours, &r.Rate, &r.PayDate, &r.Version, &r.LockedReason, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("record %s/%s/%s: %w", employee, period, component, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("read record: %w", err)
	}
	return r, nil
}

// Exception is a change held for a reviewer.
type Exception struct {
	ID          int64  `json:"id"`
	PartnerID   string `json:"partner"`
	EmployeeRef string `json:"employee_ref"`
	// EmployeeID is the employee's mapped id, or for one not onboarded yet
	// the derived id an approval would give it.
	EmployeeID string            `json:"employee_id"`
	PayPeriod  string            `json:"pay_period"`
	Component  string            `json:"component"`
	Status     string            `json:"status"`
	Code       string            `json:"code"`
	Current    map[string]string `json:"current"`
	Proposed   map[string]string `json:"proposed"`
	Differing  []string          `json:"differing"`
	EnvelopeID int64             `json:"envelope_id"`
	File       string            `json:"file"`
	Line       int               `json:"line"`
	CreatedAt  time.Time         `json:"created_at"`
	DecidedBy  string            `json:"decided_by,omitempty"`
	DecidedAt  *time.Time        `json:"decided_at,omitempty"`
	Note       string            `json:"note,omitempty"`
}

// ExceptionFilter narrows Exceptions. Empty fields match everything.
type ExceptionFilter struct {
	Scope                   []string // a reviewer's partners; empty means all
	Partner, Status, Period string
	File                    string // the submission's file name, exactly (case-insensitive)
	Code                    string // record_locked, period_locked, unknown_employee
	Component               string
	Employee                string // employee_ref prefix (case-insensitive), or an exact employee_id
	// MinChange and MaxChange bound the size of the amount change (proposed
	// amount minus locked amount, or the proposed amount for a new record),
	// as decimals, either sign counted by its absolute value.
	MinChange, MaxChange string
	AfterID              int64 // keyset pagination: only ids above this
	Limit                int   // 0 = no limit
}

var plainDecimal = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// Check reports a filter value that can never match, as a sentence for the user.
func (f ExceptionFilter) Check() error {
	for _, v := range []struct{ name, val string }{{"min change", f.MinChange}, {"max change", f.MaxChange}} {
		if v.val == "" {
			continue
		}
		if !plainDecimal.MatchString(strings.TrimSpace(v.val)) {
			return fmt.Errorf("%s %q is not a decimal amount like 100 or 2500.00", v.name, v.val)
		}
	}
	switch f.Code {
	case "", "record_locked", "period_locked", "unknown_employee":
	default:
		return fmt.Errorf("code %q: use record_locked, period_locked or unknown_employee", f.Code)
	}
	return nil
}

func (f ExceptionFilter) args() []any {
	scope := f.Scope
	if scope == nil {
		scope = []string{}
	}
	return []any{scope, f.Partner, strings.ToUpper(strings.TrimSpace(f.Period)), strings.TrimSpace(f.File), f.Code,
		strings.ToUpper(strings.TrimSpace(f.Component)), strings.TrimSpace(f.Employee),
		strings.TrimSpace(f.MinChange), strings.TrimSpace(f.MaxChange)}
}

// amountChange is an exception's amount change: proposed minus locked (the
// proposed amount for a held new record).
const amountChange = `((x.proposed ->> 'amount')::numeric - coalesce((x.current ->> 'amount')::numeric, 0))`

// queueWhere is the filter of Exceptions and ExceptionCounts, on args().
const queueWhere = `(cardinality($1::text[]) = 0 OR x.partner_id = ANY($1::text[]))
	AND ($2 = '' OR x.partner_id = $2) AND ($3 = '' OR x.pay_period = $3)
	AND ($4 = '' OR x.envelope_id IN (SELECT fe.id FROM envelopes fe WHERE fe.partner_id = x.partner_id AND lower(fe.file_name) = lower($4)))
	AND ($5 = '' OR x.code = $5) AND ($6 = '' OR x.component = $6)
	AND ($7 = '' OR starts_with(lower(x.employee_ref), lower($7)) OR EXISTS (SELECT 1 FROM employees m
		WHERE m.partner_id = x.partner_id AND m.employee_ref = x.employee_ref AND m.employee_id = $7))
	AND ($8 = '' OR abs(` + amountChange + `) >= $8::numeric)
	AND ($9 = '' OR abs(` + amountChange + `) <= $9::numeric)`

const exceptionColumns = `x.id, x.partner_id, x.employee_ref,
	coalesce((SELECT em.employee_id FROM employees em WHERE em.partner_id = x.partner_id AND em.employee_ref = x.employee_ref),
		derived_employee_id(x.partner_id, x.employee_ref)), x.pay_period, x.component, x.status, x.code,
	x.current, x.proposed, x.differing, coalesce(x.envelope_id, 0), coalesce(e.file_name, ''), coalesce(x.line, 0),
	x.created_at, coalesce(x.decided_by, ''), x.decided_at, coalesce(x.note, '')`

func scanException(row pgx.Row) (Exception, error) {
	var x Exception
	err := row.Scan(&x.ID, &x.PartnerID, &x.EmployeeRef, &x.EmployeeID, &x.PayPeriod, &x.Component, &x.Status, &x.Code,
		&x.Current, &x.Proposed, &x.Differing, &x.EnvelopeID, &x.File, &x.Line,
		&x.CreatedAt, &x.DecidedBy, &x.DecidedAt, &x.Note)
	return x, err
}

// Exceptions lists exceptions in id order (within Scope, for a reviewer
// limited to some partners).
func (s *Store) Exceptions(ctx context.Context, f ExceptionFilter) ([]Exception, error) {
	limit := any(nil)
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+exceptionColumns+`
		FROM exceptions x LEFT JOIN envelopes e ON e.id = x.envelope_id
		WHERE `+queueWhere+` AND ($10 = '' OR x.status = $10) AND x.id > $11
		ORDER BY x.id LIMIT $12`, append(f.args(), f.Status, f.AfterID, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list exceptions: %w", err)
	}
	xs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Exception, error) { return scanException(r) })
	if err != nil {
		return nil, fmt.Errorf("list exceptions: %w", err)
	}
	return xs, nil
}

// Exception reads one exception, or ErrNotFound.
func (s *Store) Exception(ctx context.Context, id int64) (Exception, error) {
	x, err := scanException(s.pool.QueryRow(ctx, `SELECT `+exceptionColumns+`
		FROM exceptions x LEFT JOIN envelopes e ON e.id = x.envelope_id WHERE x.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return x, fmt.Errorf("exception %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return x, fmt.Errorf("read exception %d: %w", id, err)
	}
	return x, nil
}
