package records_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// openException sends E1 100.00, locks the period, and sends E1 at amount:
// the change is held. It returns the open exception's id.
func openException(t *testing.T, h *applytest.Harness, amount string) int64 {
	t.Helper()
	h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
	h.Lock(t)
	h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", amount)}})
	return lastException(t, h)
}

func lastException(t *testing.T, h *applytest.Harness) int64 {
	t.Helper()
	return int64(pgtest.Count(context.Background(), t, h.Store, `SELECT max(id) FROM exceptions`))
}

// Reviewers' decisions (Decide) on a real database: each effect of approve
// and reject, and each refusal.
func TestDecisions(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		unknownEmployee string
		setup           func(t *testing.T, h *applytest.Harness) int64 // the exception to decide
		decision        records.Decision                               // ExceptionID set from setup
		wantErr         error
		check           func(t *testing.T, h *applytest.Harness, id int64, got records.Exception, err error)
	}{
		"approve a locked record's change: the next version, the old one in history, still locked": {
			setup:    func(t *testing.T, h *applytest.Harness) int64 { return openException(t, h, "150.00") },
			decision: records.Decision{Approve: true, Reviewer: "rita", Note: "ok"},
			check: func(t *testing.T, h *applytest.Harness, id int64, got records.Exception, _ error) {
				r := h.Record(t, "E1")
				if r.Amount != "150.00" || r.Version != 2 || r.LockedReason != records.LockApproved {
					t.Errorf("record %+v, want 150.00 version 2 still locked (approved)", r)
				}
				var by string
				if err := h.Store.Pool().QueryRow(ctx, `SELECT replaced_by FROM record_history WHERE version = 1 AND amount = 100`).Scan(&by); err != nil {
					t.Fatal(err)
				}
				if want := "exception " + strconv.FormatInt(id, 10) + " approved by rita"; by != want {
					t.Errorf("history replaced_by %q, want %q", by, want)
				}
				if got.Status != records.ExceptionApproved || got.DecidedBy != "rita" || got.Note != "ok" || got.DecidedAt == nil {
					t.Errorf("exception %+v, want approved by rita with note ok", got)
				}
			},
		},
		"approve a held new key in a closed period: the record is created, locked": {
			setup: func(t *testing.T, h *applytest.Harness) int64 {
				h.Lock(t)
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E5", "42.00")}})
				return lastException(t, h)
			},
			decision: records.Decision{Approve: true, Reviewer: "rita"},
			check: func(t *testing.T, h *applytest.Harness, id int64, _ records.Exception, _ error) {
				r := h.Record(t, "E5")
				if r.Amount != "42.00" || r.Version != 1 || r.LockedReason != records.LockApproved {
					t.Errorf("record %+v, want 42.00 version 1 locked (approved)", r)
				}
				d, err := h.Store.ExceptionDetail(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if d.RecordID != r.ID {
					t.Errorf("exception's record %d, want the created %d", d.RecordID, r.ID)
				}
			},
		},
		"approve a held unknown employee: onboarded with the derived id, the record created unlocked": {
			unknownEmployee: records.UnknownHold,
			setup: func(t *testing.T, h *applytest.Harness) int64 {
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E9", "7.00")}})
				return lastException(t, h)
			},
			decision: records.Decision{Approve: true, Reviewer: "rita"},
			check: func(t *testing.T, h *applytest.Harness, _ int64, _ records.Exception, _ error) {
				r := h.Record(t, "E9")
				if r.LockedReason != "" || !strings.HasPrefix(r.EmployeeID, "emp_") {
					t.Errorf("record %+v, want unlocked with a derived employee id", r)
				}
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM employees WHERE employee_ref = 'E9'
					AND source = 'derived' AND employee_id = derived_employee_id('acme', 'E9')`); n != 1 {
					t.Errorf("E9 onboarded %d times with its derived id, want once", n)
				}
			},
		},
		"reject: nothing applied, the verdict and the audit kept": {
			setup:    func(t *testing.T, h *applytest.Harness) int64 { return openException(t, h, "150.00") },
			decision: records.Decision{Approve: false, Reviewer: "rita", Note: "  not agreed  ", Via: records.ViaAPI},
			check: func(t *testing.T, h *applytest.Harness, id int64, got records.Exception, _ error) {
				r := h.Record(t, "E1")
				if r.Amount != "100.00" || r.Version != 1 {
					t.Errorf("record %+v, want 100.00 version 1", r)
				}
				if got.Status != records.ExceptionRejected || got.Note != "not agreed" {
					t.Errorf("exception %s %q, want rejected, note trimmed", got.Status, got.Note)
				}
				log, err := h.Store.AuditLog(ctx, id, 10)
				if err != nil {
					t.Fatal(err)
				}
				if len(log) != 1 || log[0].Action != "reject" || log[0].Actor != "rita" || log[0].Via != records.ViaAPI || log[0].PartnerID != "acme" {
					t.Errorf("audit %+v, want one reject by rita via api for acme", log)
				}
			},
		},
		"decided already: who decided first": {
			setup: func(t *testing.T, h *applytest.Harness) int64 {
				id := openException(t, h, "150.00")
				if _, err := h.Store.Decide(ctx, records.Decision{ExceptionID: id, Reviewer: "rita"}); err != nil {
					t.Fatal(err)
				}
				return id
			},
			decision: records.Decision{Approve: true, Reviewer: "sam"},
			wantErr:  records.ErrDecided,
			check: func(t *testing.T, h *applytest.Harness, _ int64, _ records.Exception, err error) {
				var de *records.DecidedError
				if !errors.As(err, &de) || de.By != "rita" || de.Status != records.ExceptionRejected {
					t.Errorf("error %v, want a DecidedError naming rita's rejection", err)
				}
			},
		},
		"superseded: points to the newer exception": {
			setup: func(t *testing.T, h *applytest.Harness) int64 {
				id := openException(t, h, "150.00")
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "175.00")}})
				return id
			},
			decision: records.Decision{Approve: true, Reviewer: "sam"},
			wantErr:  records.ErrDecided,
			check: func(t *testing.T, h *applytest.Harness, id int64, _ records.Exception, err error) {
				var de *records.DecidedError
				if !errors.As(err, &de) || de.SupersededBy != lastException(t, h) || de.SupersededBy == id {
					t.Errorf("error %v, want a DecidedError pointing to exception %d", err, lastException(t, h))
				}
			},
		},
		"stale: the record changed after the change was held": {
			setup: func(t *testing.T, h *applytest.Harness) int64 {
				id := openException(t, h, "150.00")
				h.Exec(t, `UPDATE records SET amount = 120, version = version + 1`)
				return id
			},
			decision: records.Decision{Approve: true, Reviewer: "sam"},
			wantErr:  records.ErrStale,
			check: func(t *testing.T, h *applytest.Harness, id int64, _ records.Exception, err error) {
				var se *records.StaleError
				if !errors.As(err, &se) || se.NewKey || se.Version != 2 {
					t.Errorf("error %v, want a StaleError at version 2", err)
				}
				if x, _ := h.Store.Exception(ctx, id); x.Status != records.ExceptionOpen {
					t.Errorf("a stale exception is %s, want still open", x.Status)
				}
			},
		},
		"stale: a held new key was created meanwhile": {
			setup: func(t *testing.T, h *applytest.Harness) int64 {
				h.Lock(t)
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E5", "42.00")}})
				id := lastException(t, h)
				if _, err := h.Store.UnlockPeriod(ctx, h.Partner, applytest.Period, "ops", "correction"); err != nil {
					t.Fatal(err)
				}
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E5", "43.00")}})
				return id
			},
			decision: records.Decision{Approve: true, Reviewer: "sam"},
			wantErr:  records.ErrStale,
			check: func(t *testing.T, h *applytest.Harness, _ int64, _ records.Exception, err error) {
				var se *records.StaleError
				if !errors.As(err, &se) || !se.NewKey {
					t.Errorf("error %v, want a StaleError for the new key", err)
				}
			},
		},
		"stale: can still be rejected": {
			setup: func(t *testing.T, h *applytest.Harness) int64 {
				id := openException(t, h, "150.00")
				h.Exec(t, `UPDATE records SET amount = 120, version = version + 1`)
				return id
			},
			decision: records.Decision{Approve: false, Reviewer: "sam"},
			check: func(t *testing.T, h *applytest.Harness, _ int64, got records.Exception, _ error) {
				if got.Status != records.ExceptionRejected {
					t.Errorf("exception %s, want rejected", got.Status)
				}
			},
		},
		"forbidden: a reviewer outside the partner": {
			setup:    func(t *testing.T, h *applytest.Harness) int64 { return openException(t, h, "150.00") },
			decision: records.Decision{Approve: true, Reviewer: "sam", Partners: []string{"other"}},
			wantErr:  records.ErrForbidden,
		},
		"not found: no such exception": {
			setup:    func(t *testing.T, h *applytest.Harness) int64 { return 999 },
			decision: records.Decision{Approve: true, Reviewer: "sam"},
			wantErr:  records.ErrNotFound,
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := applytest.New(t, tc.unknownEmployee)
			id := tc.setup(t, h)
			d := tc.decision
			d.ExceptionID = id
			got, err := h.Store.Decide(ctx, d)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, h, id, got, err)
			}
		})
	}
}
