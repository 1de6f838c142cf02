package records

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
)

// Statements of exceptions.sql.
var (
	sqlExceptions      = query("Exceptions")
	sqlException       = query("Exception")
	sqlExceptionCounts = query("ExceptionCounts")
	sqlExceptionLinks  = query("ExceptionLinks")
	sqlRecordVersions  = query("RecordVersions")
)

// queueWhere is the filter of the exception queue (on ExceptionFilter.args()),
// for the bulk decisions (bulkdecisions.go), which still compose their SQL in Go.
var queueWhere = fragment("queue_where")

// Exception statuses.
const (
	ExceptionOpen       = "open"
	ExceptionApproved   = "approved"
	ExceptionRejected   = "rejected"
	ExceptionSuperseded = "superseded"
)

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
	Code       normalize.Code    `json:"code"` // one of normalize.ExceptionCodes
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
	// PartnerCode is, for a row held for its component code
	// (unknown_component), the partner's code: Component until a reviewer
	// approves the row with the component the code means (AsComponent).
	PartnerCode string `json:"partner_code,omitempty"`
}

// ExceptionFilter narrows Exceptions. Empty fields match everything.
type ExceptionFilter struct {
	Scope                   []string // a reviewer's partners; empty means all
	Partner, Status, Period string
	File                    string         // the submission's file name, exactly (case-insensitive)
	Code                    normalize.Code // one of normalize.ExceptionCodes
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
	if f.Code != "" && !slices.Contains(normalize.ExceptionCodes(), f.Code) {
		return fmt.Errorf("code %q: use %s", string(f.Code), normalize.ExceptionCodesText())
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

const exceptionColumns = `x.id, x.partner_id, x.employee_ref,
	coalesce((SELECT em.employee_id FROM employees em WHERE em.partner_id = x.partner_id AND em.employee_ref = x.employee_ref),
		derived_employee_id(x.partner_id, x.employee_ref)), x.pay_period, x.component, x.status, x.code,
	x.current, x.proposed, x.differing, coalesce(x.envelope_id, 0), coalesce(e.file_name, ''), coalesce(x.line, 0),
	x.created_at, coalesce(x.decided_by, ''), x.decided_at, coalesce(x.note, ''), coalesce(x.partner_code, '')`

func scanException(row pgx.Row) (Exception, error) {
	var x Exception
	err := row.Scan(&x.ID, &x.PartnerID, &x.EmployeeRef, &x.EmployeeID, &x.PayPeriod, &x.Component, &x.Status, &x.Code,
		&x.Current, &x.Proposed, &x.Differing, &x.EnvelopeID, &x.File, &x.Line,
		&x.CreatedAt, &x.DecidedBy, &x.DecidedAt, &x.Note, &x.PartnerCode)
	return x, err
}

// Exceptions lists exceptions in id order (within Scope, for a reviewer
// limited to some partners).
func (s *Store) Exceptions(ctx context.Context, f ExceptionFilter) ([]Exception, error) {
	limit := any(nil)
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := s.pool.Query(ctx, sqlExceptions, append(f.args(), f.Status, f.AfterID, limit)...)
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
	x, err := scanException(s.pool.QueryRow(ctx, sqlException, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return x, fmt.Errorf("exception %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return x, fmt.Errorf("read exception %d: %w", id, err)
	}
	return x, nil
}

// ExceptionDetail is an exception with what a reviewer needs to decide it:
// the record as it is now, whether it moved on, and its history.
type ExceptionDetail struct {
	Exception
	RecordID     int64           `json:"record_id,omitempty"`
	RowNo        int             `json:"row"`
	SupersededBy int64           `json:"superseded_by,omitempty"`
	Record       *Record         `json:"record,omitempty"`
	Stale        string          `json:"stale,omitempty"` // why approve would be refused, if it would
	History      []RecordVersion `json:"history"`
}

// ExceptionDetail reads one exception with its record and history, or ErrNotFound.
func (s *Store) ExceptionDetail(ctx context.Context, id int64) (ExceptionDetail, error) {
	x, err := s.Exception(ctx, id)
	if err != nil {
		return ExceptionDetail{}, err
	}
	d := ExceptionDetail{Exception: x, History: []RecordVersion{}}
	if err := s.pool.QueryRow(ctx, sqlExceptionLinks, id).Scan(&d.RecordID, &d.RowNo, &d.SupersededBy); err != nil {
		return d, fmt.Errorf("read exception %d: %w", id, err)
	}
	rec, err := s.FindRecord(ctx, x.PartnerID, x.EmployeeRef, x.PayPeriod, x.Component)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return d, err
	default:
		d.Record = &rec
	}
	// A row held for its component code has no record until a reviewer
	// names the component: approving it asks its own questions.
	if x.Status == ExceptionOpen && x.Code != normalize.CodeUnknownComponent {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			stale, err := staleOf(ctx, tx, []int64{id})
			if se := stale[id]; se != nil {
				d.Stale = se.Error()
			}
			return err
		})
		if err != nil {
			return d, err
		}
	}
	if d.Record != nil {
		rows, err := s.pool.Query(ctx, sqlRecordVersions, d.Record.ID)
		if err != nil {
			return d, fmt.Errorf("read history of record %d: %w", d.Record.ID, err)
		}
		d.History, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (RecordVersion, error) {
			var v RecordVersion
			err := r.Scan(&v.Version, &v.Amount, &v.Currency, &v.Hours, &v.Rate, &v.PayDate, &v.File, &v.Line,
				&v.WrittenAt, &v.ReplacedAt, &v.ReplacedBy)
			return v, err
		})
		if err != nil {
			return d, fmt.Errorf("read history of record %d: %w", d.Record.ID, err)
		}
	}
	return d, nil
}

// ExceptionCounts counts exceptions per status (open, approved, rejected,
// superseded, all); Status and AfterID are ignored.
func (s *Store) ExceptionCounts(ctx context.Context, f ExceptionFilter) (map[string]int, error) {
	counts := map[string]int{ExceptionOpen: 0, ExceptionApproved: 0, ExceptionRejected: 0, ExceptionSuperseded: 0, "all": 0}
	rows, err := s.pool.Query(ctx, sqlExceptionCounts, f.args()...)
	if err != nil {
		return nil, fmt.Errorf("count exceptions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count exceptions: %w", err)
		}
		counts[st] = n
		counts["all"] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count exceptions: %w", err)
	}
	return counts, nil
}
