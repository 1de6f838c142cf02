package records_test

import (
	"context"
	"errors"
	"testing"

	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// Period locks (LockPeriod, UnlockPeriod, LockEvents) on a real database.
func TestPeriodLocks(t *testing.T) {
	ctx := context.Background()
	other := "2026-10"
	for name, tc := range map[string]struct {
		act     func(t *testing.T, h *applytest.Harness) (int64, error)
		wantN   int64
		wantErr error
		locked  map[string]string // records' locked_reason by pay period ("" unlocked)
		events  []string          // LockEvents' actions, oldest first
	}{
		"lock: every record of the period, none of another": {
			act: func(t *testing.T, h *applytest.Harness) (int64, error) {
				return h.Store.LockPeriod(ctx, h.Partner, " "+applytest.Period+" ", records.LockApproved, "ops")
			},
			wantN: 2, locked: map[string]string{applytest.Period: records.LockApproved, other: ""}, events: []string{"lock"},
		},
		"lock again: the new reason replaces the old": {
			act: func(t *testing.T, h *applytest.Harness) (int64, error) {
				h.Lock(t)
				return h.Store.LockPeriod(ctx, h.Partner, applytest.Period, records.LockPaid, "ops")
			},
			wantN: 2, locked: map[string]string{applytest.Period: records.LockPaid, other: ""}, events: []string{"lock", "lock"},
		},
		"unlock: the records opened, the count recorded": {
			act: func(t *testing.T, h *applytest.Harness) (int64, error) {
				h.Lock(t)
				return h.Store.UnlockPeriod(ctx, h.Partner, applytest.Period, "ops", "correction")
			},
			wantN: 2, locked: map[string]string{applytest.Period: "", other: ""}, events: []string{"lock", "unlock"},
		},
		"unlock a period that is not locked": {
			act: func(t *testing.T, h *applytest.Harness) (int64, error) {
				return h.Store.UnlockPeriod(ctx, h.Partner, applytest.Period, "ops", "correction")
			},
			wantErr: records.ErrNotLocked, locked: map[string]string{applytest.Period: "", other: ""},
		},
		"unlock without saying who and why": {
			act: func(t *testing.T, h *applytest.Harness) (int64, error) {
				h.Lock(t)
				return h.Store.UnlockPeriod(ctx, h.Partner, applytest.Period, "ops", "  ")
			},
			wantErr: errAny, locked: map[string]string{applytest.Period: records.LockApproved, other: ""}, events: []string{"lock"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := applytest.New(t, "")
			h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Row("E2", "2.00"),
				{EmployeeRef: "E1", PayPeriod: other, Component: "BASE", Amount: "3.00", Currency: "USD", Hash: applytest.Row("E1", "3.00").Hash}}})
			n, err := tc.act(t, h)
			switch {
			case tc.wantErr == errAny && err == nil:
				t.Fatal("no error, want one")
			case tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && err != nil:
				t.Fatal(err)
			case tc.wantErr == nil && n != tc.wantN:
				t.Errorf("%d records, want %d", n, tc.wantN)
			}
			for p, reason := range tc.locked {
				want := 0
				if reason != "" {
					want = 1
				}
				if got := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM period_locks WHERE pay_period = $1 AND reason = $2`, p, reason); got != want {
					t.Errorf("period %s: %d period locks with reason %q, want %d", p, got, reason, want)
				}
				if got := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM records WHERE pay_period = $1 AND coalesce(locked_reason, '') <> $2`, p, reason); got != 0 {
					t.Errorf("period %s: %d records not locked as %q", p, got, reason)
				}
			}
			evs, err := h.Store.LockEvents(ctx, h.Partner, "")
			if err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, e := range evs {
				actions = append(actions, e.Action)
				if e.Action == "unlock" && (e.Records == nil || *e.Records != 2 || e.Reason != "correction" || e.By != "ops") {
					t.Errorf("unlock event %+v, want 2 records, by ops for correction", e)
				}
			}
			if len(actions) != len(tc.events) {
				t.Fatalf("events %v, want %v", actions, tc.events)
			}
			for i := range actions {
				if actions[i] != tc.events[i] {
					t.Errorf("events %v, want %v", actions, tc.events)
				}
			}
		})
	}
}

// errAny stands for "some error" in a table.
var errAny = errors.New("any error")
