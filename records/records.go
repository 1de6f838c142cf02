package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of records.sql.
var (
	sqlFindRecord = query("FindRecord")
)

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
	err := s.pool.QueryRow(ctx, sqlFindRecord,
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

// RecordVersion is one version of a record, the current one first in History.
type RecordVersion struct {
	Version    int        `json:"version"`
	Amount     string     `json:"amount"`
	Currency   string     `json:"currency"`
	Hours      string     `json:"hours"`
	Rate       string     `json:"rate"`
	PayDate    string     `json:"pay_date"`
	File       string     `json:"file"`
	Line       int        `json:"line"`
	WrittenAt  time.Time  `json:"written_at"`
	ReplacedAt *time.Time `json:"replaced_at,omitempty"`
	ReplacedBy string     `json:"replaced_by,omitempty"`
}
