package apply_test

// Store-level tests of processing: every classification branch of
// classifySQL and every statement of applySQL, driven through Receive and
// Process with staged rows built here (no CSV, no normalize), on a real
// database. Expected outcomes, codes and fields are those docs/contract.md
// promises partners.

import (
	"context"
	"strings"
	"testing"

	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func seq(n int64) *int64 { return &n }

// want is what the result file says of one row.
type want struct{ outcome, code, field string }

func TestClassificationBranches(t *testing.T) {
	for name, tc := range map[string]struct {
		unknownEmployee string // the partner's --unknown-employee; "" create
		before          func(t *testing.T, h *applytest.Harness)
		file            applytest.File
		want            []want
		message         string // a part of the first row's message, when it matters
		records         int    // records stored after the file
	}{
		"created: a new key": {
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}},
			want: []want{{"created", "", ""}}, records: 1,
		},
		"unchanged: the same values again": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}},
			want: []want{{"unchanged", "", ""}}, records: 1,
		},
		"updated: other values for a stored key": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "150.00")}},
			want: []want{{"updated", "", ""}}, records: 1,
		},
		"held: the record is locked": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
				h.Lock(t)
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "150.00")}},
			want: []want{{"held", "record_locked", ""}}, message: "this record is locked (approved)", records: 1,
		},
		"unchanged: the same values for a locked record": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
				h.Lock(t)
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}},
			want: []want{{"unchanged", "", ""}}, records: 1,
		},
		"held: a new key in a closed period": {
			before: func(t *testing.T, h *applytest.Harness) { h.Lock(t) },
			file:   applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}},
			want:   []want{{"held", "period_locked", ""}}, message: "pay period 2026-11 is closed (approved)", records: 0,
		},
		"held: an unlocked record in a closed period": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
				h.Lock(t)
				h.Exec(t, `UPDATE records SET locked_reason = NULL, locked_at = NULL`)
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "150.00")}},
			want: []want{{"held", "period_locked", ""}}, records: 1,
		},
		"stale: an older sequence than the one that wrote the record": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Seq: seq(5), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
			},
			file: applytest.File{Seq: seq(3), Rows: []records.StagedRow{applytest.Row("E1", "150.00")}},
			want: []want{{"stale", "superseded", ""}}, message: "a newer file (sequence 5) already wrote this record and this file has sequence 3", records: 1,
		},
		"unchanged: an older sequence with the same values": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Seq: seq(5), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
			},
			file: applytest.File{Seq: seq(3), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}},
			want: []want{{"unchanged", "", ""}}, records: 1,
		},
		"stale: older than a sequence that only confirmed the record": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Seq: seq(5), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
				h.Send(t, applytest.File{Seq: seq(7), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
			},
			file: applytest.File{Seq: seq(6), Rows: []records.StagedRow{applytest.Row("E1", "150.00")}},
			want: []want{{"stale", "superseded", ""}}, records: 1,
		},
		"updated: a newer sequence": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Seq: seq(5), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
			},
			file: applytest.File{Seq: seq(6), Rows: []records.StagedRow{applytest.Row("E1", "150.00")}},
			want: []want{{"updated", "", ""}}, records: 1,
		},
		"rejected: a row normalize refused keeps its code, field and message": {
			file: applytest.File{Rows: []records.StagedRow{applytest.Invalid("E1", "too_many_decimals", "amount", "amount has 3 decimals"), applytest.Row("E2", "1.00")}},
			want: []want{{"rejected", "too_many_decimals", "amount"}, {"created", "", ""}}, message: "amount has 3 decimals", records: 1,
		},
		"rejected: a key twice in the file, both rows; the others apply": {
			file:    applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Row("E2", "2.00"), applytest.Row("E1", "3.00")}},
			want:    []want{{"rejected", "duplicate_key_in_file", ""}, {"created", "", ""}, {"rejected", "duplicate_key_in_file", ""}},
			message: "appears on lines 2, 4 of this file", records: 1,
		},
		"rejected: an unknown employee when the partner rejects them": {
			unknownEmployee: records.UnknownReject,
			file:            applytest.File{Rows: []records.StagedRow{applytest.Row("E9", "1.00")}},
			want:            []want{{"rejected", "unknown_employee", "employee_ref"}}, message: "is not onboarded", records: 0,
		},
		"created: a mapped employee when the partner rejects unknown ones": {
			unknownEmployee: records.UnknownReject,
			before: func(t *testing.T, h *applytest.Harness) {
				if _, err := h.Store.ImportEmployees(context.Background(), h.Partner, []records.EmployeeMapping{{Line: 2, EmployeeRef: "E1", EmployeeID: "W-1"}}); err != nil {
					t.Fatal(err)
				}
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "1.00")}},
			want: []want{{"created", "", ""}}, records: 1,
		},
		"held: an unknown employee when the partner holds them": {
			unknownEmployee: records.UnknownHold,
			file:            applytest.File{Rows: []records.StagedRow{applytest.Row("E9", "1.00")}},
			want:            []want{{"held", "unknown_employee", "employee_ref"}}, message: "it is held as an exception for a reviewer", records: 0,
		},
		"held: a component code the profile does not map, under hold": {
			file: applytest.File{Rows: []records.StagedRow{applytest.HeldCode(applytest.Row("E1", "1.00"), "XMAS", "component code \"XMAS\" has no mapping"),
				applytest.Row("E2", "2.00")}},
			want: []want{{"held", "unknown_component", "component"}, {"created", "", ""}}, message: `component code "XMAS" has no mapping`, records: 1,
		},
		"held: a component code, before the employee's hold": {
			unknownEmployee: records.UnknownHold,
			file:            applytest.File{Rows: []records.StagedRow{applytest.HeldCode(applytest.Row("E9", "1.00"), "XMAS", "held code")}},
			want:            []want{{"held", "unknown_component", "component"}}, message: "held code", records: 0,
		},
		"held: a component code whose key has a record of that name": {
			before: func(t *testing.T, h *applytest.Harness) {
				r := applytest.Row("E1", "1.00")
				r.Component = "XMAS"
				h.Send(t, applytest.File{Rows: []records.StagedRow{r}})
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.HeldCode(applytest.Row("E1", "1.00"), "XMAS", "held code")}},
			want: []want{{"held", "unknown_component", "component"}}, records: 1,
		},
		"rejected: a held component code's key twice in the file": {
			file: applytest.File{Rows: []records.StagedRow{applytest.HeldCode(applytest.Row("E1", "1.00"), "XMAS", "held code"),
				applytest.HeldCode(applytest.Row("E1", "2.00"), "XMAS", "held code")}},
			want: []want{{"rejected", "duplicate_key_in_file", ""}, {"rejected", "duplicate_key_in_file", ""}}, records: 0,
		},
		"rejected: an unknown employee the partner rejects, before its held component code": {
			unknownEmployee: records.UnknownReject,
			file:            applytest.File{Rows: []records.StagedRow{applytest.HeldCode(applytest.Row("E9", "1.00"), "XMAS", "held code")}},
			want:            []want{{"rejected", "unknown_employee", "employee_ref"}}, records: 0,
		},
		"rejected: the id an unknown employee would get belongs to another": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Exec(t, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
					VALUES ($1, 'OTHER', derived_employee_id($1, 'E9'), 'derived')`, h.Partner)
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E9", "1.00")}},
			want: []want{{"rejected", "unknown_employee", "employee_ref"}}, message: "already belongs to another employee", records: 0,
		},
		"rejected: all-or-nothing, one invalid row rejects the valid ones": {
			file:    applytest.File{AllOrNothing: true, Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Invalid("E2", "bad_date", "pay_date", "no such date")}},
			want:    []want{{"rejected", "file_rejected", ""}, {"rejected", "bad_date", "pay_date"}},
			message: "the file is processed all-or-nothing", records: 0,
		},
		"rejected: all-or-nothing, a duplicate key rejects the file": {
			file:    applytest.File{AllOrNothing: true, Rows: []records.StagedRow{applytest.Row("E2", "2.00"), applytest.Row("E1", "1.00"), applytest.Row("E1", "3.00")}},
			want:    []want{{"rejected", "file_rejected", ""}, {"rejected", "duplicate_key_in_file", ""}, {"rejected", "duplicate_key_in_file", ""}},
			records: 0,
		},
		"rejected: all-or-nothing, a rejected unknown employee rejects the file": {
			unknownEmployee: records.UnknownReject,
			before: func(t *testing.T, h *applytest.Harness) {
				if _, err := h.Store.ImportEmployees(context.Background(), h.Partner, []records.EmployeeMapping{{Line: 2, EmployeeRef: "E1", EmployeeID: "W-1"}}); err != nil {
					t.Fatal(err)
				}
			},
			file:    applytest.File{AllOrNothing: true, Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Row("E9", "1.00")}},
			want:    []want{{"rejected", "file_rejected", ""}, {"rejected", "unknown_employee", "employee_ref"}},
			records: 0,
		},
		"created: all-or-nothing with every row valid applies them all": {
			file: applytest.File{AllOrNothing: true, Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Row("E2", "2.00")}},
			want: []want{{"created", "", ""}, {"created", "", ""}}, records: 2,
		},
		// A pure first file (no record and no lock of the partner in its
		// periods) is applied straight from the staged rows
		// (TestPureFirstFileMatchesClassify compares both paths).
		"created: a new period beside a stored one": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.InPeriod(applytest.Row("E1", "100.00"), "2026-10")}})
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00"), applytest.Invalid("E2", "bad_date", "pay_date", "no such date")}},
			want: []want{{"created", "", ""}, {"rejected", "bad_date", "pay_date"}}, records: 2,
		},
		"created: a new key in a period that has records": {
			before: func(t *testing.T, h *applytest.Harness) {
				h.Send(t, applytest.File{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}})
			},
			file: applytest.File{Rows: []records.StagedRow{applytest.Row("E2", "100.00"), applytest.InPeriod(applytest.Row("E2", "5.00"), "2026-12")}},
			want: []want{{"created", "", ""}, {"created", "", ""}}, records: 3,
		},
		"rejected: every row invalid": {
			file:    applytest.File{Rows: []records.StagedRow{applytest.Invalid("E1", "bad_date", "pay_date", "no such date"), applytest.Invalid("E2", "too_many_decimals", "amount", "3 decimals")}},
			want:    []want{{"rejected", "bad_date", "pay_date"}, {"rejected", "too_many_decimals", "amount"}},
			message: "no such date", records: 0,
		},
		"rejected: a file with no rows, as a whole (row 0)": {
			file: applytest.File{Rows: nil},
			want: []want{{"rejected", "no_rows", ""}}, message: "no data rows", records: 0,
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := applytest.New(t, tc.unknownEmployee)
			if tc.before != nil {
				tc.before(t, h)
			}
			env, got := h.Send(t, tc.file)
			if env.Status != records.StatusProcessed {
				t.Errorf("envelope status %q, want processed", env.Status)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d result rows %+v, want %d", len(got), got, len(tc.want))
			}
			counts := map[string]int{}
			for i, w := range tc.want {
				g := got[i]
				if string(g.Outcome) != w.outcome || g.Code != w.code || g.Field != w.field {
					t.Errorf("row %d: %s/%s/%s, want %s/%s/%s (%s)", g.Row, g.Outcome, g.Code, g.Field, w.outcome, w.code, w.field, g.Message)
				}
				counts[w.outcome]++
			}
			if tc.message != "" && !strings.Contains(got[0].Message, tc.message) {
				t.Errorf("message %q does not say %q", got[0].Message, tc.message)
			}
			for o, n := range counts {
				if env.Counts[o] != n {
					t.Errorf("envelope counts %v, want %d %s", env.Counts, n, o)
				}
			}
			if n := pgtest.Count(context.Background(), t, h.Store, `SELECT count(*) FROM records`); n != tc.records {
				t.Errorf("%d records stored, want %d", n, tc.records)
			}
		})
	}
}
