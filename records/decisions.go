package records

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
)

// Statements of decisions.sql.
var (
	sqlStaleExceptions          = query("StaleExceptions")
	sqlExceptionPartner         = query("ExceptionPartner")
	sqlExceptionsToDecide       = query("ExceptionsToDecide")
	sqlDecideExceptions         = query("DecideExceptions")
	sqlAuditDecisions           = query("AuditDecisions")
	sqlKeepApprovedHistory      = query("KeepApprovedHistory")
	sqlApplyApprovedChanges     = query("ApplyApprovedChanges")
	sqlOnboardApprovedEmployees = query("OnboardApprovedEmployees")
	sqlCreateApprovedRecords    = query("CreateApprovedRecords")
)

// Reviewers' decisions on held exceptions.
//
// Decisions: Decide takes the partner lock, refuses an exception that is no
// longer open (DecidedError: "exception N was already approved by X at T"),
// and changes the status with UPDATE ... WHERE status = 'open', writing the
// effect (approve: a new version of the record, the old one in history),
// the reviewer, time and note, and an audit row in one transaction. The
// review report of the exception's envelope is written in that same
// transaction when its last open exception closes (WriteReviewReports).
//
// Stale exceptions: if the record changed after the exception was raised
// (its values differ from the exception's "current" snapshot, or a record
// now exists for a held new key), approving would silently overwrite a change
// nobody reviewed against, so approve is refused with a StaleError; the
// exception stays open and can be rejected.

var (
	// ErrDecided is matched by a DecidedError.
	ErrDecided = errors.New("exception already decided")
	// ErrStale is matched by a StaleError.
	ErrStale = errors.New("record changed since the exception was raised")
	// ErrForbidden is returned when a reviewer acts outside their partners.
	ErrForbidden = errors.New("not allowed for this reviewer")
	// ErrComponent is matched by a ComponentError: an approval that lacks
	// the component a held code means, or names one it cannot take.
	ErrComponent = errors.New("the component of an approval")
)

// ComponentError refuses an approval over its component: a row held for
// its component code approved without one, a component given for another
// exception, or one the row cannot take as the ordinary rules stand.
type ComponentError struct {
	ID   int64
	Verb string // "" approved
	Msg  string
}

func (e *ComponentError) Error() string {
	verb := e.Verb
	if verb == "" {
		verb = "approved"
	}
	if e.ID == 0 {
		return fmt.Sprintf("the exceptions cannot be %s: %s", verb, e.Msg)
	}
	return fmt.Sprintf("exception %d cannot be %s: %s", e.ID, verb, e.Msg)
}

func (e *ComponentError) Is(target error) bool { return target == ErrComponent }

// HeldAgain says of a row held for its component code, given a component,
// that the ordinary rules hold it again: its exception stays open with the
// code they hold it for. It is not a refusal (the component was given and
// kept); decideLocked lists it with them because the exception is not
// decided yet.
type HeldAgain struct {
	ID                    int64
	PartnerCode, As, Code string
}

func (e *HeldAgain) Error() string {
	return fmt.Sprintf("exception %d: component code %s is %s, and the row is held again (%s) for a reviewer: decide it as such", e.ID, e.PartnerCode, e.As, e.Code)
}

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
	// AsComponent is, for approving a row held for its component code
	// (unknown_component), the component the code means; required there,
	// refused elsewhere. Read as a component is (trimmed, upper-cased).
	AsComponent string
}

// InScope reports whether a reviewer limited to partners (empty: all) may act for partner.
func InScope(partners []string, partner string) bool {
	return len(partners) == 0 || slices.Contains(partners, partner)
}

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
	if err := s.pool.QueryRow(ctx, sqlExceptionPartner, d.ExceptionID).Scan(&partner); errors.Is(err, pgx.ErrNoRows) {
		return Exception{}, fmt.Errorf("exception %d: %w", d.ExceptionID, ErrNotFound)
	} else if err != nil {
		return Exception{}, fmt.Errorf("read exception %d: %w", d.ExceptionID, err)
	}
	if !InScope(d.Partners, partner) {
		return Exception{}, fmt.Errorf("reviewer %s may not decide exceptions of partner %s: %w", d.Reviewer, partner, ErrForbidden)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := PartnerLock(ctx, tx, partner); err != nil {
			return err
		}
		_, refused, err := decideLocked(ctx, tx, d, partner, []int64{d.ExceptionID})
		var again *HeldAgain
		if err == nil && !errors.As(refused[d.ExceptionID], &again) { // held again: the exception says how
			err = refused[d.ExceptionID]
		}
		if err != nil {
			return err
		}
		return s.SealReviews(ctx, tx, partner)
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
	if strings.TrimSpace(d.AsComponent) != "" {
		if !d.Approve {
			return d, &ComponentError{ID: d.ExceptionID, Verb: "rejected", Msg: "a component is given only to approve a row held for its component code; reject without one"}
		}
		c, err := normalize.ComponentCode(d.AsComponent)
		if err != nil {
			return d, &ComponentError{ID: d.ExceptionID, Msg: fmt.Sprintf("%q cannot be a component: %v", d.AsComponent, err)}
		}
		d.AsComponent = c
	} else {
		d.AsComponent = ""
	}
	return d, nil
}

// decideLocked decides the exceptions ids of partner inside tx, which holds
// the partner lock, with a few set-based statements whatever their number
// (but for rows held for their component code, which take four statements
// each: approveComponent).
// Exceptions that cannot be decided (no longer open: *DecidedError; an
// approval whose record moved on: *StaleError; a component that does not
// fit: *ComponentError) are returned in refused, before anything is
// written for them, and so is a row held for its code that its component
// holds again (*HeldAgain: given the component, still open); every other one is decided, its
// effect applied and audited, and the review report of a submission whose
// last open exception it closes written (WriteReviewReports).
func decideLocked(ctx context.Context, tx pgx.Tx, d Decision, partner string, ids []int64) (decided []int64, refused map[int64]error, err error) {
	action, status := "reject", ExceptionRejected
	if d.Approve {
		action, status = "approve", ExceptionApproved
	}
	refused = map[int64]error{}
	rows, err := tx.Query(ctx, sqlExceptionsToDecide, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("read exceptions: %w", err)
	}
	var open, newKey, heldCode []int64
	for rows.Next() {
		var (
			id, supersededBy int64
			cur, by, code    string
			at               *time.Time
			noRecord         bool
		)
		if err := rows.Scan(&id, &cur, &by, &at, &supersededBy, &noRecord, &code); err != nil {
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
		if d.Approve && (code == string(normalize.CodeUnknownComponent)) != (d.AsComponent != "") {
			refused[id] = componentRefusal(id, d.AsComponent)
			continue
		}
		open = append(open, id)
		if code == string(normalize.CodeUnknownComponent) && d.Approve {
			heldCode = append(heldCode, id)
		} else if noRecord {
			newKey = append(newKey, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read exceptions: %w", err)
	}
	var unchanged []int64
	if len(heldCode) > 0 {
		// Each row held for its code becomes the row as read with the
		// component given: applied (created, updated or unchanged), held
		// again under the ordinary rules, or refused.
		out, err := approveComponent(ctx, tx, d, partner, heldCode)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range heldCode {
			o := out[id]
			switch {
			case o.refused != nil:
				refused[id] = o.refused
			case o.Outcome == OutcomeHeld:
				refused[id] = &HeldAgain{ID: id, PartnerCode: o.code, As: d.AsComponent, Code: string(o.Code)}
			case o.Outcome == OutcomeCreated:
				newKey = append(newKey, id)
			case o.Outcome == OutcomeUnchanged:
				unchanged = append(unchanged, id)
			}
			if o.refused != nil || o.Outcome == OutcomeHeld {
				open = slices.DeleteFunc(open, func(x int64) bool { return x == id })
			}
		}
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
	envRows, err := tx.Query(ctx, sqlDecideExceptions, open, status, d.Reviewer, strings.TrimSpace(d.Note))
	if err != nil {
		return nil, nil, fmt.Errorf("decide exceptions: %w", err)
	}
	envs, err := pgx.CollectRows(envRows, pgx.RowTo[*int64])
	if err != nil {
		return nil, nil, fmt.Errorf("decide exceptions: %w", err)
	}
	if len(envs) != len(open) { // cannot happen under the partner lock; kept as the last word
		return nil, nil, fmt.Errorf("decide exceptions: %d of %d were still open; another reviewer decided at the same time, try again", len(envs), len(open))
	}
	if err := WriteReviewReports(ctx, tx, envs); err != nil {
		return nil, nil, err
	}
	if d.Approve {
		apply := slices.DeleteFunc(slices.Clone(open), func(id int64) bool { return slices.Contains(unchanged, id) })
		if err := applyApproval(ctx, tx, apply, newKey, d.Reviewer); err != nil {
			return nil, nil, err
		}
	}
	if _, err := tx.Exec(ctx, sqlAuditDecisions,
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
	rows, err := tx.Query(ctx, sqlStaleExceptions, ids)
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
		if _, err := tx.Exec(ctx, sqlKeepApprovedHistory, existing, reviewer); err != nil {
			return fmt.Errorf("keep the history of the approved records: %w", err)
		}
		tag, err := tx.Exec(ctx, sqlApplyApprovedChanges, existing)
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
		if _, err := tx.Exec(ctx, sqlOnboardApprovedEmployees, newKey); err != nil {
			return fmt.Errorf("onboard the employees of the approved new keys: %w", err)
		}
		tag, err := tx.Exec(ctx, sqlCreateApprovedRecords, newKey)
		if err != nil {
			return fmt.Errorf("create the records of the approved new keys: %w", err)
		}
		if tag.RowsAffected() != int64(len(newKey)) {
			return fmt.Errorf("create the records of the approved new keys: %d of %d created", tag.RowsAffected(), len(newKey))
		}
	}
	return nil
}
