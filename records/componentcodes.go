package records

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
)

// Rows held for their component code (a code the partner's profile does
// not map, under unknown_component: hold; exception code
// unknown_component). The reviewer approves such a row with the component
// the code means: the row becomes the row as read with that component —
// its key (employee, period, component), its content hash over the
// normalised fields — and gets what the ordinary rules give it
// (previewOutcome, classify's order for one row): created or updated (the
// approval applies it), unchanged (nothing to write), or held again
// (record_locked, period_locked, unknown_employee: the same exception,
// now of that code, stays open for a reviewer). What the rules would
// reject (an unknown employee of a partner that rejects them), a newer
// file's record, another open exception of the new key, and a code whose
// meaning reviewers already gave otherwise are refused, with what to do,
// before anything is written. The meaning is kept (component_codes): the
// partner's later files read the code as that component, so the row sent
// again is unchanged. Every approval is audited with the component.

// Statements of componentcodes.sql.
var (
	sqlComponentApprovals = query("ComponentApprovals")
	sqlRekeyException     = query("RekeyException")
	sqlExceptionDiffering = query("ExceptionDiffering")
	sqlKeepComponentCode  = query("KeepComponentCode")
	sqlComponentCodes     = query("ComponentCodes")
)

// ComponentCode is what reviewers said one of a partner's codes means.
type ComponentCode struct {
	Code        string    `json:"code"`
	Component   string    `json:"component"`
	ExceptionID int64     `json:"exception_id"`
	DecidedBy   string    `json:"decided_by"`
	DecidedAt   time.Time `json:"decided_at"`
}

// ComponentCodes lists what reviewers said partner's codes mean, by code.
func (s *Store) ComponentCodes(ctx context.Context, partner string) ([]ComponentCode, error) {
	rows, err := s.pool.Query(ctx, sqlComponentCodes, partner)
	if err != nil {
		return nil, fmt.Errorf("list the component codes of partner %q: %w", partner, err)
	}
	cs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ComponentCode])
	if err != nil {
		return nil, fmt.Errorf("list the component codes of partner %q: %w", partner, err)
	}
	return cs, nil
}

// componentOutcome is what approving one row held for its code gives it,
// or why it is refused.
type componentOutcome struct {
	Preview
	code    string // the partner's
	refused error
}

// componentRefusal refuses an approval whose component does not fit the
// exception: none for a row held for its code, one for any other.
func componentRefusal(id int64, component string) error {
	if component == "" {
		return &ComponentError{ID: id, Msg: "its row is held because the partner's profile does not map its component code; " +
			"approve it with the component the code means (CLI --as-component, API \"as_component\", the console's component field), or reject it"}
	}
	return &ComponentError{ID: id, Msg: fmt.Sprintf("component %s is given, but the exception is not held for its component code: approve it without a component", component)}
}

// approveComponent re-keys the rows ids (held for their component code,
// open, of partner) with d.AsComponent under the partner lock, keeps the
// code's meaning and audits each, and returns what each row gets.
func approveComponent(ctx context.Context, tx pgx.Tx, d Decision, partner string, ids []int64) (map[int64]componentOutcome, error) {
	type approval struct {
		id                           int64
		code                         string
		proposed                     map[string]string
		seq, recordID, recordSeq     *int64
		hash                         []byte
		locked, periodLocked, mapped bool
		policy                       string
		openID, decidedBy            *int64
		decided                      *string
	}
	rows, err := tx.Query(ctx, sqlComponentApprovals, ids, d.AsComponent)
	if err != nil {
		return nil, fmt.Errorf("read the rows held for their component code: %w", err)
	}
	var as []approval
	for rows.Next() {
		var a approval
		var proposed []byte
		if err := rows.Scan(&a.id, &a.code, &proposed, &a.seq, &a.recordID, &a.hash, &a.recordSeq, &a.locked, &a.periodLocked,
			&a.mapped, &a.policy, &a.openID, &a.decided, &a.decidedBy); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the rows held for their component code: %w", err)
		}
		if err := json.Unmarshal(proposed, &a.proposed); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the proposal of exception %d: %w", a.id, err)
		}
		as = append(as, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the rows held for their component code: %w", err)
	}
	out := map[int64]componentOutcome{}
	keys := map[[2]string]int64{} // employee and period: one row of this decision per new key
	for _, a := range as {
		var v [8]string
		for i, f := range normalize.FieldNames {
			v[i] = a.proposed[f]
		}
		v[2] = d.AsComponent
		hash := normalize.HashOfValues(v)
		o := componentOutcome{Preview: previewOutcome(PreviewKey{Hash: hash[:]}, false, a.hash, a.locked, a.periodLocked, a.mapped, a.policy)}
		k := [2]string{v[0], v[1]}
		switch {
		case a.decided != nil && *a.decided != d.AsComponent:
			o.refused = &ComponentError{ID: a.id, Msg: fmt.Sprintf("reviewers already decided that code %s of partner %s means component %s (exception %d): approve it with %s, or reject it",
				a.code, partner, *a.decided, *a.decidedBy, *a.decided)}
		case a.openID != nil:
			o.refused = &ComponentError{ID: a.id, Msg: fmt.Sprintf("exception %d is open for employee %s, period %s, component %s: decide it first, then this one",
				*a.openID, v[0], v[1], d.AsComponent)}
		case keys[k] != 0:
			o.refused = &ComponentError{ID: a.id, Msg: fmt.Sprintf("exception %d of this decision is for employee %s, period %s too, and would take component %s as well: decide them one by one",
				keys[k], v[0], v[1], d.AsComponent)}
		case o.Outcome == OutcomeRejected:
			o.refused = &ComponentError{ID: a.id, Msg: fmt.Sprintf("employee %s is not onboarded and partner %s rejects unknown employees: onboard the employee (payintake employees import), then approve it",
				v[0], partner)}
		case a.recordID != nil && o.Outcome != OutcomeUnchanged && a.seq != nil && a.recordSeq != nil && *a.recordSeq > *a.seq:
			// classify's stale, before a locked record or a closed period.
			o.refused = &ComponentError{ID: a.id, Msg: fmt.Sprintf("record %d with component %s was written by a newer file (sequence %d; this row's file has %d): reject it, and have the partner resend the row if it is still wanted",
				*a.recordID, d.AsComponent, *a.recordSeq, *a.seq)}
		}
		o.code = a.code
		if o.refused == nil {
			keys[k] = a.id
		}
		out[a.id] = o
		if o.refused != nil {
			continue
		}
		code := string(normalize.CodeUnknownComponent)
		if o.Outcome == OutcomeHeld {
			code = string(o.Code)
		}
		if _, err := tx.Exec(ctx, sqlRekeyException, a.id, d.AsComponent, hash[:], code); err != nil {
			return nil, fmt.Errorf("give exception %d component %s: %w", a.id, d.AsComponent, err)
		}
		if _, err := tx.Exec(ctx, sqlExceptionDiffering, a.id); err != nil {
			return nil, fmt.Errorf("give exception %d component %s: %w", a.id, d.AsComponent, err)
		}
		if _, err := tx.Exec(ctx, sqlKeepComponentCode, partner, a.code, d.AsComponent, a.id, d.Reviewer); err != nil {
			return nil, fmt.Errorf("keep the meaning of code %s: %w", a.code, err)
		}
		detail := fmt.Sprintf("code %s is component %s: the row is %s", a.code, d.AsComponent, o.Outcome)
		if o.Outcome == OutcomeHeld {
			detail = fmt.Sprintf("code %s is component %s: the row is held again (%s) for a reviewer", a.code, d.AsComponent, o.Code)
		}
		if err := audit(ctx, tx, AuditEntry{Actor: d.Reviewer, Via: d.Via, Action: "component", ExceptionID: a.id,
			PartnerID: partner, Detail: detail}); err != nil {
			return nil, err
		}
	}
	return out, nil
}
