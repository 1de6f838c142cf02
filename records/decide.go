package records

// Reviewers' decisions on held exceptions, period unlocks, reviewer accounts
// and sessions, the review audit trail and the review reports.
//
// Decisions: Decide takes the partner lock, refuses an exception that is no
// longer open (DecidedError: "exception N was already approved by X at T"),
// and changes the status with UPDATE ... WHERE status = 'open', writing the
// effect (approve: a new version of the record, the old one in history),
// the reviewer, time and note, and an audit row in one transaction. The
// review report of the exception's envelope is written by a trigger
// (migrations/00004_review.sql) in that same transaction when its last open
// exception closes.
//
// Stale exceptions: if the record changed after the exception was raised
// (its values differ from the exception's "current" snapshot, or a record
// now exists for a held new key), approving would silently overwrite a change
// nobody reviewed against, so approve is refused with a StaleError; the
// exception stays open and can be rejected.

import (
	"context"
	"errors"
	"fmt"
	"github.com/jackc/pgerrcode"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Exception statuses.
const (
	ExceptionOpen       = "open"
	ExceptionApproved   = "approved"
	ExceptionRejected   = "rejected"
	ExceptionSuperseded = "superseded"
)

// Where a reviewer acted from, kept in the audit trail.
const (
	ViaCLI     = "cli"
	ViaAPI     = "api"
	ViaConsole = "console"
)

var (
	// ErrDecided is matched by a DecidedError.
	ErrDecided = errors.New("exception already decided")
	// ErrStale is matched by a StaleError.
	ErrStale = errors.New("record changed since the exception was raised")
	// ErrForbidden is returned when a reviewer acts outside their partners.
	ErrForbidden = errors.New("not allowed for this reviewer")
	// ErrNotLocked is returned when unlocking a period that is not locked.
	ErrNotLocked = errors.New("period is not locked")
)

// DecidedError tells the loser of a race (or a late reviewer) who decided first.
type DecidedError struct {
	ID           int64
	Status       string
	By           string
	At           time.Time
	SupersededBy int64
}

func (e *DecidedError) Error() string {
	at := e.At.UTC().Format("2006-01-02 15:04:05 UTC")
	switch {
	case e.Status == ExceptionSuperseded && e.SupersededBy != 0:
		return fmt.Sprintf("exception %d was superseded at %s by exception %d (a later file proposed a different change): decide exception %d instead",
			e.ID, at, e.SupersededBy, e.SupersededBy)
	case e.Status == ExceptionSuperseded:
		return fmt.Sprintf("exception %d was superseded at %s by a later file's different change: decide the open exception of that record instead", e.ID, at)
	default:
		return fmt.Sprintf("exception %d was already %s by %s at %s", e.ID, e.Status, e.By, at)
	}
}

func (e *DecidedError) Is(target error) bool { return target == ErrDecided }

// StaleError refuses to approve an exception whose record changed after it was raised.
type StaleError struct {
	ID       int64
	RecordID int64
	Version  int
	NewKey   bool // the exception was for a new natural key, which now exists
}

func (e *StaleError) Error() string {
	if e.NewKey {
		return fmt.Sprintf("exception %d cannot be approved: record %d with this employee, period and component was created after the change was held; reject it, and have the partner resend the change if it is still wanted", e.ID, e.RecordID)
	}
	return fmt.Sprintf("exception %d cannot be approved: record %d changed after the change was held (it is now version %d); reject it, and have the partner resend the change if it is still wanted", e.ID, e.RecordID, e.Version)
}

func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Decision is one reviewer's verdict on one exception.
type Decision struct {
	ExceptionID int64
	Approve     bool // false: reject
	Reviewer    string
	Note        string
	Via         string   // cli, api, console
	Partners    []string // the reviewer's partners; empty means all
}

// InScope reports whether a reviewer limited to partners (empty: all) may act for partner.
func InScope(partners []string, partner string) bool {
	return len(partners) == 0 || slices.Contains(partners, partner)
}

// recordJSON builds the same object classify.go stores as an exception's "current".
var recordJSON = fieldsJSON("r")

// Decide approves or rejects an open exception. Exactly one of several
// concurrent deciders wins; the others get a *DecidedError. Approving applies
// the proposed values as a new version of the record (which stays locked),
// or, for a held new natural key, creates the record, locked if its period
// still is. It returns the exception as decided.
func (s *Store) Decide(ctx context.Context, d Decision) (Exception, error) {
	var err error
	if d, err = d.normal(); err != nil {
		return Exception{}, err
	}
	var partner string
	if err := s.pool.QueryRow(ctx, `SELECT partner_id FROM exceptions WHERE id = $1`, d.ExceptionID).Scan(&partner); errors.Is(err, pgx.ErrNoRows) {
		return Exception{}, fmt.Errorf("exception %d: %w", d.ExceptionID, ErrNotFound)
	} else if err != nil {
		return Exception{}, fmt.Errorf("read exception %d: %w", d.ExceptionID, err)
	}
	if !InScope(d.Partners, partner) {
		return Exception{}, fmt.Errorf("reviewer %s may not decide exceptions of partner %s: %w", d.Reviewer, partner, ErrForbidden)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := partnerLock(ctx, tx, partner); err != nil {
			return err
		}
		_, refused, err := decideLocked(ctx, tx, d, partner, []int64{d.ExceptionID})
		if err == nil {
			err = refused[d.ExceptionID]
		}
		return err
	})
	if err != nil {
		return Exception{}, err
	}
	return s.Exception(ctx, d.ExceptionID)
}

// normal trims a decision and fills its defaults, or says what is missing.
func (d Decision) normal() (Decision, error) {
	d.Reviewer = strings.TrimSpace(d.Reviewer)
	if d.Reviewer == "" {
		return d, errors.New("a decision needs the reviewer's name")
	}
	if d.Via == "" {
		d.Via = ViaCLI
	}
	return d, nil
}

// decideLocked decides the exceptions ids of partner inside tx, which holds
// the partner lock, with a few set-based statements whatever their number.
// Exceptions that cannot be decided (no longer open: *DecidedError; an
// approval whose record moved on: *StaleError) are returned in refused,
// before anything is written for them; every other one is decided, its
// effect applied and audited. The review report of a submission whose last
// open exception closes is written by a trigger on the UPDATE.
func decideLocked(ctx context.Context, tx pgx.Tx, d Decision, partner string, ids []int64) (decided []int64, refused map[int64]error, err error) {
	action, status := "reject", ExceptionRejected
	if d.Approve {
		action, status = "approve", ExceptionApproved
	}
	refused = map[int64]error{}
	rows, err := tx.Query(ctx, `SELECT id, status, coalesce(decided_by, ''), decided_at, coalesce(superseded_by, 0), record_id IS NULL
		FROM exceptions WHERE id = ANY($1) ORDER BY id`, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("read exceptions: %w", err)
	}
	var open, newKey []int64
	for rows.Next() {
		var (
			id, supersededBy int64
			cur, by          string
			at               *time.Time
			noRecord         bool
		)
		if err := rows.Scan(&id, &cur, &by, &at, &supersededBy, &noRecord); err != nil {
			return nil, nil, fmt.Errorf("read exceptions: %w", err)
		}
		if cur != ExceptionOpen {
			de := &DecidedError{ID: id, Status: cur, By: by, SupersededBy: supersededBy}
			if at != nil {
				de.At = *at
			}
			refused[id] = de
			continue
		}
		open = append(open, id)
		if noRecord {
			newKey = append(newKey, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read exceptions: %w", err)
	}
	if d.Approve {
		stale, err := staleOf(ctx, tx, open)
		if err != nil {
			return nil, nil, err
		}
		for id, se := range stale {
			refused[id] = se
		}
		open = slices.DeleteFunc(open, func(id int64) bool { return stale[id] != nil })
		newKey = slices.DeleteFunc(newKey, func(id int64) bool { return stale[id] != nil })
	}
	if len(open) == 0 {
		return nil, refused, nil
	}
	tag, err := tx.Exec(ctx, `UPDATE exceptions SET status = $2, decided_by = $3, decided_at = now(), note = nullif($4, '')
		WHERE id = ANY($1) AND status = 'open'`, open, status, d.Reviewer, strings.TrimSpace(d.Note))
	if err != nil {
		return nil, nil, fmt.Errorf("decide exceptions: %w", err)
	}
	if tag.RowsAffected() != int64(len(open)) { // cannot happen under the partner lock; kept as the last word
		return nil, nil, fmt.Errorf("decide exceptions: %d of %d were still open; another reviewer decided at the same time, try again", tag.RowsAffected(), len(open))
	}
	if d.Approve {
		if err := applyApproval(ctx, tx, open, newKey, d.Reviewer); err != nil {
			return nil, nil, err
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO review_audit (actor, via, action, exception_id, partner_id, detail)
		SELECT $2, $3, $4, id, $5, $6 FROM unnest($1::bigint[]) AS id ORDER BY id`,
		open, d.Reviewer, d.Via, action, partner, strings.TrimSpace(d.Note)); err != nil {
		return nil, nil, fmt.Errorf("write the review audit: %w", err)
	}
	return open, refused, nil
}

// staleOf finds, among open exceptions ids, those whose approval would
// silently overwrite a change nobody reviewed against: the record's values
// differ from the exception's "current" snapshot, or a record now exists for
// a held new key.
func staleOf(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]*StaleError, error) {
	stale := map[int64]*StaleError{}
	rows, err := tx.Query(ctx, `
		SELECT x.id, r.id, r.version, true FROM exceptions x
		JOIN records r ON r.partner_id = x.partner_id AND r.employee_ref = x.employee_ref
			AND r.pay_period = x.pay_period AND r.component = x.component
		WHERE x.id = ANY($1) AND x.record_id IS NULL
		UNION ALL
		SELECT x.id, r.id, r.version, false FROM exceptions x JOIN records r ON r.id = x.record_id
		WHERE x.id = ANY($1) AND `+recordJSON+` IS DISTINCT FROM x.current`, ids)
	if err != nil {
		return nil, fmt.Errorf("check the records of exceptions: %w", err)
	}
	for rows.Next() {
		var se StaleError
		if err := rows.Scan(&se.ID, &se.RecordID, &se.Version, &se.NewKey); err != nil {
			return nil, fmt.Errorf("check the records of exceptions: %w", err)
		}
		stale[se.ID] = &se
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check the records of exceptions: %w", err)
	}
	return stale, nil
}

// applyApproval applies approved exceptions ids: a new version of each
// existing record (the old one kept in history), and a record for each held
// new key (newKey), locked if its period still is.
func applyApproval(ctx context.Context, tx pgx.Tx, ids, newKey []int64, reviewer string) error {
	existing := slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return slices.Contains(newKey, id) })
	if len(existing) > 0 {
		if _, err := tx.Exec(ctx, `
			INSERT INTO record_history (record_id, version, amount, currency, hours, rate, pay_date, content_hash,
				envelope_id, line, written_at, replaced_by)
			SELECT r.id, r.version, r.amount, r.currency, r.hours, r.rate, r.pay_date, r.content_hash,
				r.envelope_id, r.line, r.updated_at, format('exception %s approved by %s', x.id, $2::text)
			FROM exceptions x JOIN records r ON r.id = x.record_id WHERE x.id = ANY($1)`, existing, reviewer); err != nil {
			return fmt.Errorf("keep the history of the approved records: %w", err)
		}
		tag, err := tx.Exec(ctx, `
			UPDATE records r SET amount = (x.proposed ->> 'amount')::numeric, currency = x.proposed ->> 'currency',
				hours = nullif(x.proposed ->> 'hours', '')::numeric, rate = nullif(x.proposed ->> 'rate', '')::numeric,
				pay_date = nullif(x.proposed ->> 'pay_date', '')::date, content_hash = x.proposed_hash,
				version = r.version + 1, last_seq = greatest(r.last_seq, e.seq),
				envelope_id = x.envelope_id, line = x.line, updated_at = now()
			FROM exceptions x LEFT JOIN envelopes e ON e.id = x.envelope_id
			WHERE x.id = ANY($1) AND r.id = x.record_id`, existing)
		if err != nil {
			return fmt.Errorf("apply the approved exceptions: %w", err)
		}
		if tag.RowsAffected() != int64(len(existing)) {
			return fmt.Errorf("apply the approved exceptions: %d of %d records are gone", int64(len(existing))-tag.RowsAffected(), len(existing))
		}
	}
	if len(newKey) > 0 {
		// A held new key may be of an employee not onboarded yet (code
		// unknown_employee, or a closed period under --unknown-employee
		// create): approving onboards it with the derived id, unless a
		// mapping was imported meanwhile. Before the records, which need it.
		if _, err := tx.Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
			SELECT DISTINCT partner_id, employee_ref, derived_employee_id(partner_id, employee_ref), 'derived'
			FROM exceptions WHERE id = ANY($1)
			ON CONFLICT (partner_id, employee_ref) DO NOTHING`, newKey); err != nil {
			return fmt.Errorf("onboard the employees of the approved new keys: %w", err)
		}
		tag, err := tx.Exec(ctx, `
			WITH created AS (
				INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, hours, rate,
					pay_date, content_hash, last_seq, envelope_id, line, locked_reason, locked_at)
				SELECT x.partner_id, x.employee_ref, x.pay_period, x.component, (x.proposed ->> 'amount')::numeric,
					x.proposed ->> 'currency', nullif(x.proposed ->> 'hours', '')::numeric, nullif(x.proposed ->> 'rate', '')::numeric,
					nullif(x.proposed ->> 'pay_date', '')::date, x.proposed_hash, e.seq, x.envelope_id, x.line,
					pl.reason, CASE WHEN pl.reason IS NOT NULL THEN now() END
				FROM exceptions x
				LEFT JOIN envelopes e ON e.id = x.envelope_id
				LEFT JOIN period_locks pl ON pl.partner_id = x.partner_id AND pl.pay_period = x.pay_period
				WHERE x.id = ANY($1)
				RETURNING id, partner_id, employee_ref, pay_period, component)
			UPDATE exceptions x SET record_id = c.id FROM created c
			WHERE x.id = ANY($1) AND x.partner_id = c.partner_id AND x.employee_ref = c.employee_ref
				AND x.pay_period = c.pay_period AND x.component = c.component`, newKey)
		if err != nil {
			return fmt.Errorf("create the records of the approved new keys: %w", err)
		}
		if tag.RowsAffected() != int64(len(newKey)) {
			return fmt.Errorf("create the records of the approved new keys: %d of %d created", tag.RowsAffected(), len(newKey))
		}
	}
	return nil
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

// ExceptionDetail reads one exception with its record and history, or ErrNotFound.
func (s *Store) ExceptionDetail(ctx context.Context, id int64) (ExceptionDetail, error) {
	x, err := s.Exception(ctx, id)
	if err != nil {
		return ExceptionDetail{}, err
	}
	d := ExceptionDetail{Exception: x, History: []RecordVersion{}}
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(record_id, 0), coalesce(row_no, 0), coalesce(superseded_by, 0)
		FROM exceptions WHERE id = $1`, id).Scan(&d.RecordID, &d.RowNo, &d.SupersededBy); err != nil {
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
	if x.Status == ExceptionOpen {
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
		rows, err := s.pool.Query(ctx, `
			SELECT v.version, v.amount::text, v.currency, coalesce(v.hours::text, ''), coalesce(v.rate::text, ''),
				coalesce(v.pay_date::text, ''), coalesce(e.file_name, ''), coalesce(v.line, 0), v.written_at, v.replaced_at, v.replaced_by
			FROM (
				SELECT version, amount, currency, hours, rate, pay_date, envelope_id, line, updated_at AS written_at,
					NULL::timestamptz AS replaced_at, '' AS replaced_by
				FROM records WHERE id = $1
				UNION ALL
				SELECT version, amount, currency, hours, rate, pay_date, envelope_id, line, written_at, replaced_at, replaced_by
				FROM record_history WHERE record_id = $1
			) v LEFT JOIN envelopes e ON e.id = v.envelope_id
			ORDER BY v.version DESC`, d.Record.ID)
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
	rows, err := s.pool.Query(ctx, `SELECT x.status, count(*) FROM exceptions x WHERE `+queueWhere+` GROUP BY x.status`, f.args()...)
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
		if err := partnerLock(ctx, tx, partner); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM period_locks WHERE partner_id = $1 AND pay_period = $2`, partner, period)
		if err != nil {
			return fmt.Errorf("unlock period %s of partner %q: %w", period, partner, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("period %s of partner %s: %w", period, partner, ErrNotLocked)
		}
		tag, err = tx.Exec(ctx, `UPDATE records SET locked_reason = NULL, locked_at = NULL
			WHERE partner_id = $1 AND pay_period = $2 AND locked_reason IS NOT NULL`, partner, period)
		if err != nil {
			return fmt.Errorf("unlock records of period %s: %w", period, err)
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `INSERT INTO lock_events (partner_id, pay_period, action, reason, by, records)
			VALUES ($1, $2, 'unlock', $3, $4, $5)`, partner, period, reason, by, n)
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
	rows, err := s.pool.Query(ctx, `SELECT id, partner_id, pay_period, action, reason, by, at, records
		FROM lock_events WHERE partner_id = $1 AND ($2 = '' OR pay_period = upper($2)) ORDER BY id`, partner, strings.TrimSpace(period))
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

// Reviewer is an account that may decide exceptions.
type Reviewer struct {
	Name      string    `json:"name"`
	Partners  []string  `json:"partners"` // empty: every partner
	CreatedAt time.Time `json:"created_at"`
	Disabled  bool      `json:"disabled"`
}

// AddReviewer creates a reviewer account with an already hashed password.
// It returns ErrExists if the name is taken and ErrNotFound for an unknown partner.
func (s *Store) AddReviewer(ctx context.Context, name, passwordHash string, partners []string) error {
	if partners == nil {
		partners = []string{}
	}
	for _, p := range partners {
		if _, err := s.Partner(ctx, p); err != nil {
			return err
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO reviewers (name, password_hash, partners) VALUES ($1, $2, $3)`,
		name, passwordHash, partners)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return fmt.Errorf("reviewer %q: %w", name, ErrExists)
	}
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.CheckViolation {
		return fmt.Errorf("reviewer name %q must be letters, digits, '.', '_', '@' or '-' (at most 64)", name)
	}
	if err != nil {
		return fmt.Errorf("add reviewer %q: %w", name, err)
	}
	return nil
}

// SetReviewerPassword replaces a reviewer's password hash and ends their sessions.
func (s *Store) SetReviewerPassword(ctx context.Context, name, passwordHash string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE reviewers SET password_hash = $2 WHERE name = $1`, name, passwordHash)
		if err != nil {
			return fmt.Errorf("set password of reviewer %q: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("reviewer %q: %w", name, ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM reviewer_sessions WHERE reviewer = $1`, name); err != nil {
			return fmt.Errorf("end sessions of reviewer %q: %w", name, err)
		}
		return nil
	})
}

// SetReviewerDisabled disables a reviewer account (ending all its sessions
// in the same transaction, so nothing they hold works a moment longer) or
// enables it again. It reports whether anything changed, or ErrNotFound.
func (s *Store) SetReviewerDisabled(ctx context.Context, name string, disabled bool) (bool, error) {
	var changed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var was bool
		err := tx.QueryRow(ctx, `SELECT disabled_at IS NOT NULL FROM reviewers WHERE name = $1 FOR UPDATE`, name).Scan(&was)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("reviewer %q: %w", name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read reviewer %q: %w", name, err)
		}
		changed = was != disabled
		if _, err := tx.Exec(ctx, `UPDATE reviewers SET disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END
			WHERE name = $1`, name, disabled); err != nil {
			return fmt.Errorf("update reviewer %q: %w", name, err)
		}
		if disabled {
			if _, err := tx.Exec(ctx, `DELETE FROM reviewer_sessions WHERE reviewer = $1`, name); err != nil {
				return fmt.Errorf("end sessions of reviewer %q: %w", name, err)
			}
		}
		return nil
	})
	return changed, err
}

// ReviewerByName reads an active reviewer and their password hash, or ErrNotFound.
func (s *Store) ReviewerByName(ctx context.Context, name string) (Reviewer, string, error) {
	var r Reviewer
	var hash string
	err := s.pool.QueryRow(ctx, `SELECT name, partners, created_at, password_hash FROM reviewers
		WHERE name = $1 AND disabled_at IS NULL`, name).Scan(&r.Name, &r.Partners, &r.CreatedAt, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, "", fmt.Errorf("reviewer %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return r, "", fmt.Errorf("read reviewer %q: %w", name, err)
	}
	return r, hash, nil
}

// Reviewers lists every reviewer account by name.
func (s *Store) Reviewers(ctx context.Context) ([]Reviewer, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, partners, created_at, disabled_at IS NOT NULL FROM reviewers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list reviewers: %w", err)
	}
	rs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Reviewer, error) {
		var r Reviewer
		err := row.Scan(&r.Name, &r.Partners, &r.CreatedAt, &r.Disabled)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list reviewers: %w", err)
	}
	return rs, nil
}

// Session is a logged-in reviewer: a console cookie or an API bearer token.
type Session struct {
	Reviewer  Reviewer
	Kind      string // console, api
	CSRFToken string
	ExpiresAt time.Time
}

// CreateSession stores a session by the SHA-256 of its token.
func (s *Store) CreateSession(ctx context.Context, tokenHash []byte, reviewer, kind, csrf string, expires time.Time) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO reviewer_sessions (token_hash, reviewer, kind, csrf_token, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, tokenHash, reviewer, kind, csrf, expires)
	if err != nil {
		return fmt.Errorf("create session for reviewer %q: %w", reviewer, err)
	}
	// Expired sessions are swept as new ones are made.
	if _, err := s.pool.Exec(ctx, `DELETE FROM reviewer_sessions WHERE expires_at < now()`); err != nil {
		return fmt.Errorf("sweep expired sessions: %w", err)
	}
	return nil
}

// SessionByToken reads an unexpired session of an active reviewer, or ErrNotFound.
func (s *Store) SessionByToken(ctx context.Context, tokenHash []byte, kind string) (Session, error) {
	var ss Session
	err := s.pool.QueryRow(ctx, `SELECT r.name, r.partners, r.created_at, s.kind, s.csrf_token, s.expires_at
		FROM reviewer_sessions s JOIN reviewers r ON r.name = s.reviewer
		WHERE s.token_hash = $1 AND s.kind = $2 AND s.expires_at > now() AND r.disabled_at IS NULL`, tokenHash, kind).
		Scan(&ss.Reviewer.Name, &ss.Reviewer.Partners, &ss.Reviewer.CreatedAt, &ss.Kind, &ss.CSRFToken, &ss.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ss, fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return ss, fmt.Errorf("read session: %w", err)
	}
	return ss, nil
}

// DeleteSession ends a session (logout).
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM reviewer_sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// AuditEntry is one line of the review audit trail.
type AuditEntry struct {
	ID          int64     `json:"id"`
	At          time.Time `json:"at"`
	Actor       string    `json:"actor"`
	Via         string    `json:"via"`
	Action      string    `json:"action"` // approve, reject, login, login_failed, logout, token, denied, reviewer_add
	ExceptionID int64     `json:"exception_id,omitempty"`
	PartnerID   string    `json:"partner,omitempty"`
	Detail      string    `json:"detail,omitempty"`
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func audit(ctx context.Context, db execer, e AuditEntry) error {
	var xid any
	if e.ExceptionID != 0 {
		xid = e.ExceptionID
	}
	_, err := db.Exec(ctx, `INSERT INTO review_audit (actor, via, action, exception_id, partner_id, detail)
		VALUES ($1, $2, $3, $4, nullif($5, ''), $6)`, e.Actor, e.Via, e.Action, xid, e.PartnerID, e.Detail)
	if err != nil {
		return fmt.Errorf("write the review audit: %w", err)
	}
	return nil
}

// Audit records an event that has no effect of its own (a login, a refusal).
func (s *Store) Audit(ctx context.Context, e AuditEntry) error { return audit(ctx, s.pool, e) }

// AuditLog lists the audit trail, newest first; exceptionID 0 means all.
func (s *Store) AuditLog(ctx context.Context, exceptionID int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT id, at, actor, via, action, coalesce(exception_id, 0), coalesce(partner_id, ''), detail
		FROM review_audit WHERE ($1 = 0 OR exception_id = $1) ORDER BY id DESC LIMIT $2`, exceptionID, limit)
	if err != nil {
		return nil, fmt.Errorf("read the review audit: %w", err)
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.ID, &e.At, &e.Actor, &e.Via, &e.Action, &e.ExceptionID, &e.PartnerID, &e.Detail)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the review audit: %w", err)
	}
	return es, nil
}

// ReviewReportInfo describes a stored review report.
type ReviewReportInfo struct {
	EnvelopeID int64     `json:"envelope_id"`
	PartnerID  string    `json:"partner"`
	FileName   string    `json:"file_name"` // the uploaded file's name
	Name       string    `json:"name"`      // NAME.review.csv
	Size       int64     `json:"size"`
	CreatedAt  time.Time `json:"created_at"`
}

// ReviewReports lists the review reports of a partner's submissions, oldest first.
func (s *Store) ReviewReports(ctx context.Context, partner string) ([]ReviewReportInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT v.envelope_id, e.partner_id, e.file_name, length(v.data), v.created_at
		FROM envelope_reviews v JOIN envelopes e ON e.id = v.envelope_id
		WHERE e.partner_id = $1 ORDER BY v.envelope_id`, partner)
	if err != nil {
		return nil, fmt.Errorf("list review reports of partner %q: %w", partner, err)
	}
	rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReviewReportInfo, error) {
		var i ReviewReportInfo
		err := r.Scan(&i.EnvelopeID, &i.PartnerID, &i.FileName, &i.Size, &i.CreatedAt)
		i.Name = ReviewReportName(i.FileName)
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("list review reports of partner %q: %w", partner, err)
	}
	return rs, nil
}

// ReviewReport writes the stored review report of an envelope (following a
// replay to its original) to w, or returns ErrNotFound while the envelope
// still has open exceptions (or never had any).
func (s *Store) ReviewReport(ctx context.Context, envelopeID int64, w io.Writer) error {
	env, err := s.Envelope(ctx, envelopeID)
	if err != nil {
		return err
	}
	if env, err = s.Outcome(ctx, env); err != nil {
		return err
	}
	var data []byte
	err = s.pool.QueryRow(ctx, `SELECT data FROM envelope_reviews WHERE envelope_id = $1`, env.ID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("review report of envelope %d: %w", env.ID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read review report of envelope %d: %w", env.ID, err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write review report: %w", err)
	}
	return nil
}
