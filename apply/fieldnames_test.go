package apply_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// TestExceptionFieldsAreFieldNames: an exception's current and proposed
// values and its list of differing fields are written by the processing
// SQL (records.FieldsJSON and records.DifferingSQL in classify.go's
// statements); they are normalize.FieldNames, and differing follows their
// order.
func TestExceptionFieldsAreFieldNames(t *testing.T) {
	ctx := context.Background()
	h := applytest.NewWith(t, applytest.Config{})
	const header = "employee_ref,pay_period,component,amount,currency,hours,rate,pay_date\n"
	h.SendCSV(t, header+"E1,2026-11,BASE,100.00,USD,10,10.00,2026-11-30\n", nil)
	if _, err := h.Store.LockPeriod(ctx, h.Partner, "2026-11", records.LockPaid, "tester"); err != nil {
		t.Fatal(err)
	}
	// A locked record changed in every field but its key, and a new key in
	// the closed period.
	h.SendCSV(t, header+"E1,2026-11,BASE,120.00,EUR,12,10.00,2026-11-29\nE2,2026-11,BASE,5.00,USD,,,\n", nil)
	xs, err := h.Store.Exceptions(ctx, records.ExceptionFilter{Partner: h.Partner, Status: "open"})
	if err != nil || len(xs) != 2 {
		t.Fatalf("exceptions %+v %v, want 2", xs, err)
	}
	fields := slices.Clone(normalize.FieldNames)
	slices.Sort(fields)
	for _, x := range xs {
		if got := slices.Sorted(maps.Keys(x.Proposed)); !slices.Equal(got, fields) {
			t.Errorf("exception %d (%s): proposed names %q, want %q", x.ID, x.Code, got, fields)
		}
	}
	locked, fresh := xs[0], xs[1]
	if got := slices.Sorted(maps.Keys(locked.Current)); !slices.Equal(got, fields) {
		t.Errorf("record_locked: current names %q, want %q", got, fields)
	}
	// What differs, in FieldNames order: amount, currency, hours, pay_date
	// (rate is the same); for a new key, every field.
	if want := []string{normalize.FieldAmount, normalize.FieldCurrency, normalize.FieldHours, normalize.FieldPayDate}; !slices.Equal(locked.Differing, want) {
		t.Errorf("record_locked: differing %q, want %q", locked.Differing, want)
	}
	if !slices.Equal(fresh.Differing, normalize.FieldNames) {
		t.Errorf("period_locked new key: differing %q, want %q", fresh.Differing, normalize.FieldNames)
	}
}
