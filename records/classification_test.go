package records_test

// Store-level tests of processing: every classification branch of
// classifySQL and every statement of applySQL, driven through Receive and
// Process with staged rows built here (no CSV, no normalize), on a real
// database. Expected outcomes, codes and fields are those docs/contract.md
// promises partners.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

const period = "2026-11"

// storeHarness is one partner on a fresh database.
type storeHarness struct {
	st      *records.Store
	partner string
	files   int
}

func newHarness(t *testing.T, unknownEmployee string) *storeHarness {
	t.Helper()
	h := &storeHarness{st: pgtest.Store(t), partner: "acme"}
	if err := h.st.AddPartner(context.Background(), records.Partner{ID: h.partner, Name: "Acme", Currency: "USD",
		UnknownEmployee: unknownEmployee}); err != nil {
		t.Fatal(err)
	}
	return h
}

// row is a valid staged row of employee ref for period, component BASE,
// its content hash over the values (the key's own rows share it only when
// their values are the same).
func row(ref, amount string) records.StagedRow {
	h := sha256.Sum256([]byte(amount + "|USD|||"))
	return records.StagedRow{EmployeeRef: ref, PayPeriod: period, Component: "BASE", Amount: amount, Currency: "USD", Hash: h[:]}
}

// inPeriod is r in pay period p.
func inPeriod(r records.StagedRow, p string) records.StagedRow {
	r.PayPeriod = p
	return r
}

// invalid is a row normalize rejected: no normalised values, its raw cells
// (echoed in the result) in the D* fields.
func invalid(ref, code, field, msg string) records.StagedRow {
	return records.StagedRow{DEmployeeRef: ref, DPayPeriod: period, DComponent: "BASE", DAmount: "x", DCurrency: "USD",
		Code: code, Field: field, Message: msg}
}

type file struct {
	seq          *int64
	allOrNothing bool
	lock         bool // the period is locked before the file is sent
	rows         []records.StagedRow
}

type rowSource struct{ rows []records.StagedRow }

func (s *rowSource) Next() (records.StagedRow, error) {
	if len(s.rows) == 0 {
		return records.StagedRow{}, io.EOF
	}
	r := s.rows[0]
	s.rows = s.rows[1:]
	return r, nil
}

// send receives f as a new file and processes it, and returns the
// envelope and its result rows.
func (h *storeHarness) send(t *testing.T, f file) (records.Envelope, []records.ResultRow) {
	t.Helper()
	ctx := context.Background()
	h.files++
	name := fmt.Sprintf("pay-%d.csv", h.files)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(fmt.Sprintf("file %d of %s\n", h.files, t.Name())), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := h.st.Receive(ctx, records.Incoming{PartnerID: h.partner, FileName: name, Source: "cli", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]records.StagedRow, len(f.rows))
	for i, r := range f.rows {
		r.Row, r.Line = i+1, i+2
		rows[i] = r
	}
	env, err = h.st.Process(ctx, env.ID, func(context.Context, records.Envelope, records.Partner, io.Reader) (records.Plan, error) {
		return records.Plan{Seq: f.seq, AllOrNothing: f.allOrNothing, Rows: &rowSource{rows: rows}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := h.st.ResultRows(ctx, env.ID, -1, 1000, func(r records.ResultRow) (records.ResultRow, bool) { return r, true })
	if err != nil {
		t.Fatal(err)
	}
	return env, got
}

// record reads the record of employee ref (period, BASE); the test fails
// when there is none.
func (h *storeHarness) record(t *testing.T, ref string) records.Record {
	t.Helper()
	r, err := h.st.FindRecord(context.Background(), h.partner, ref, period, "BASE")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (h *storeHarness) lock(t *testing.T) {
	t.Helper()
	if _, err := h.st.LockPeriod(context.Background(), h.partner, period, records.LockApproved, "ops"); err != nil {
		t.Fatal(err)
	}
}

func (h *storeHarness) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := h.st.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func seq(n int64) *int64 { return &n }

// want is what the result file says of one row.
type want struct{ outcome, code, field string }

func TestClassificationBranches(t *testing.T) {
	for name, tc := range map[string]struct {
		unknownEmployee string // the partner's --unknown-employee; "" create
		before          func(t *testing.T, h *storeHarness)
		file            file
		want            []want
		message         string // a part of the first row's message, when it matters
		records         int    // records stored after the file
	}{
		"created: a new key": {
			file: file{rows: []records.StagedRow{row("E1", "100.00")}},
			want: []want{{"created", "", ""}}, records: 1,
		},
		"unchanged: the same values again": {
			before: func(t *testing.T, h *storeHarness) { h.send(t, file{rows: []records.StagedRow{row("E1", "100.00")}}) },
			file:   file{rows: []records.StagedRow{row("E1", "100.00")}},
			want:   []want{{"unchanged", "", ""}}, records: 1,
		},
		"updated: other values for a stored key": {
			before: func(t *testing.T, h *storeHarness) { h.send(t, file{rows: []records.StagedRow{row("E1", "100.00")}}) },
			file:   file{rows: []records.StagedRow{row("E1", "150.00")}},
			want:   []want{{"updated", "", ""}}, records: 1,
		},
		"held: the record is locked": {
			before: func(t *testing.T, h *storeHarness) {
				h.send(t, file{rows: []records.StagedRow{row("E1", "100.00")}})
				h.lock(t)
			},
			file: file{rows: []records.StagedRow{row("E1", "150.00")}},
			want: []want{{"held", "record_locked", ""}}, message: "this record is locked (approved)", records: 1,
		},
		"unchanged: the same values for a locked record": {
			before: func(t *testing.T, h *storeHarness) {
				h.send(t, file{rows: []records.StagedRow{row("E1", "100.00")}})
				h.lock(t)
			},
			file: file{rows: []records.StagedRow{row("E1", "100.00")}},
			want: []want{{"unchanged", "", ""}}, records: 1,
		},
		"held: a new key in a closed period": {
			before: func(t *testing.T, h *storeHarness) { h.lock(t) },
			file:   file{rows: []records.StagedRow{row("E1", "100.00")}},
			want:   []want{{"held", "period_locked", ""}}, message: "pay period 2026-11 is closed (approved)", records: 0,
		},
		"held: an unlocked record in a closed period": {
			before: func(t *testing.T, h *storeHarness) {
				h.send(t, file{rows: []records.StagedRow{row("E1", "100.00")}})
				h.lock(t)
				h.exec(t, `UPDATE records SET locked_reason = NULL, locked_at = NULL`)
			},
			file: file{rows: []records.StagedRow{row("E1", "150.00")}},
			want: []want{{"held", "period_locked", ""}}, records: 1,
		},
		"stale: an older sequence than the one that wrote the record": {
			before: func(t *testing.T, h *storeHarness) {
				h.send(t, file{seq: seq(5), rows: []records.StagedRow{row("E1", "100.00")}})
			},
			file: file{seq: seq(3), rows: []records.StagedRow{row("E1", "150.00")}},
			want: []want{{"stale", "superseded", ""}}, message: "a newer file (sequence 5) already wrote this record and this file has sequence 3", records: 1,
		},
		"unchanged: an older sequence with the same values": {
			before: func(t *testing.T, h *storeHarness) {
				h.send(t, file{seq: seq(5), rows: []records.StagedRow{row("E1", "100.00")}})
			},
			file: file{seq: seq(3), rows: []records.StagedRow{row("E1", "100.00")}},
			want: []want{{"unchanged", "", ""}}, records: 1,
		},
		"stale: older than a sequence that only confirmed the record": {
			before: func(t *testing.T, h *storeHarness) {
				h.send(t, file{seq: seq(5), rows: []records.StagedRow{row("E1", "100.00")}})
				h.send(t, file{seq: seq(7), rows: []records.StagedRow{row("E1", "100.00")}})
			},
			file: file{seq: seq(6), rows: []records.StagedRow{row("E1", "150.00")}},
			want: []want{{"stale", "superseded", ""}}, records: 1,
		},
		"updated: a newer sequence": {
			before: func(t *testing.T, h *storeHarness) {
				h.send(t, file{seq: seq(5), rows: []records.StagedRow{row("E1", "100.00")}})
			},
			file: file{seq: seq(6), rows: []records.StagedRow{row("E1", "150.00")}},
			want: []want{{"updated", "", ""}}, records: 1,
		},
		"rejected: a row normalize refused keeps its code, field and message": {
			file: file{rows: []records.StagedRow{invalid("E1", "too_many_decimals", "amount", "amount has 3 decimals"), row("E2", "1.00")}},
			want: []want{{"rejected", "too_many_decimals", "amount"}, {"created", "", ""}}, message: "amount has 3 decimals", records: 1,
		},
		"rejected: a key twice in the file, both rows; the others apply": {
			file:    file{rows: []records.StagedRow{row("E1", "1.00"), row("E2", "2.00"), row("E1", "3.00")}},
			want:    []want{{"rejected", "duplicate_key_in_file", ""}, {"created", "", ""}, {"rejected", "duplicate_key_in_file", ""}},
			message: "appears on lines 2, 4 of this file", records: 1,
		},
		"rejected: an unknown employee when the partner rejects them": {
			unknownEmployee: records.UnknownReject,
			file:            file{rows: []records.StagedRow{row("E9", "1.00")}},
			want:            []want{{"rejected", "unknown_employee", "employee_ref"}}, message: "is not onboarded", records: 0,
		},
		"created: a mapped employee when the partner rejects unknown ones": {
			unknownEmployee: records.UnknownReject,
			before: func(t *testing.T, h *storeHarness) {
				if _, err := h.st.ImportEmployees(context.Background(), h.partner, []records.EmployeeMapping{{Line: 2, EmployeeRef: "E1", EmployeeID: "W-1"}}); err != nil {
					t.Fatal(err)
				}
			},
			file: file{rows: []records.StagedRow{row("E1", "1.00")}},
			want: []want{{"created", "", ""}}, records: 1,
		},
		"held: an unknown employee when the partner holds them": {
			unknownEmployee: records.UnknownHold,
			file:            file{rows: []records.StagedRow{row("E9", "1.00")}},
			want:            []want{{"held", "unknown_employee", "employee_ref"}}, message: "it is held as an exception for a reviewer", records: 0,
		},
		"rejected: the id an unknown employee would get belongs to another": {
			before: func(t *testing.T, h *storeHarness) {
				h.exec(t, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
					VALUES ($1, 'OTHER', derived_employee_id($1, 'E9'), 'derived')`, h.partner)
			},
			file: file{rows: []records.StagedRow{row("E9", "1.00")}},
			want: []want{{"rejected", "unknown_employee", "employee_ref"}}, message: "already belongs to another employee", records: 0,
		},
		"rejected: all-or-nothing, one invalid row rejects the valid ones": {
			file:    file{allOrNothing: true, rows: []records.StagedRow{row("E1", "1.00"), invalid("E2", "bad_date", "pay_date", "no such date")}},
			want:    []want{{"rejected", "file_rejected", ""}, {"rejected", "bad_date", "pay_date"}},
			message: "the file is processed all-or-nothing", records: 0,
		},
		"rejected: all-or-nothing, a duplicate key rejects the file": {
			file:    file{allOrNothing: true, rows: []records.StagedRow{row("E2", "2.00"), row("E1", "1.00"), row("E1", "3.00")}},
			want:    []want{{"rejected", "file_rejected", ""}, {"rejected", "duplicate_key_in_file", ""}, {"rejected", "duplicate_key_in_file", ""}},
			records: 0,
		},
		"rejected: all-or-nothing, a rejected unknown employee rejects the file": {
			unknownEmployee: records.UnknownReject,
			before: func(t *testing.T, h *storeHarness) {
				if _, err := h.st.ImportEmployees(context.Background(), h.partner, []records.EmployeeMapping{{Line: 2, EmployeeRef: "E1", EmployeeID: "W-1"}}); err != nil {
					t.Fatal(err)
				}
			},
			file:    file{allOrNothing: true, rows: []records.StagedRow{row("E1", "1.00"), row("E9", "1.00")}},
			want:    []want{{"rejected", "file_rejected", ""}, {"rejected", "unknown_employee", "employee_ref"}},
			records: 0,
		},
		"created: all-or-nothing with every row valid applies them all": {
			file: file{allOrNothing: true, rows: []records.StagedRow{row("E1", "1.00"), row("E2", "2.00")}},
			want: []want{{"created", "", ""}, {"created", "", ""}}, records: 2,
		},
		// A pure first file (no record and no lock of the partner in its
		// periods) is applied straight from the staged rows
		// (intake.TestPureFirstFileMatchesClassify compares both paths).
		"created: a new period beside a stored one": {
			before: func(t *testing.T, h *storeHarness) {
				h.send(t, file{rows: []records.StagedRow{inPeriod(row("E1", "100.00"), "2026-10")}})
			},
			file: file{rows: []records.StagedRow{row("E1", "100.00"), invalid("E2", "bad_date", "pay_date", "no such date")}},
			want: []want{{"created", "", ""}, {"rejected", "bad_date", "pay_date"}}, records: 2,
		},
		"created: a new key in a period that has records": {
			before: func(t *testing.T, h *storeHarness) { h.send(t, file{rows: []records.StagedRow{row("E1", "100.00")}}) },
			file:   file{rows: []records.StagedRow{row("E2", "100.00"), inPeriod(row("E2", "5.00"), "2026-12")}},
			want:   []want{{"created", "", ""}, {"created", "", ""}}, records: 3,
		},
		"rejected: every row invalid": {
			file:    file{rows: []records.StagedRow{invalid("E1", "bad_date", "pay_date", "no such date"), invalid("E2", "too_many_decimals", "amount", "3 decimals")}},
			want:    []want{{"rejected", "bad_date", "pay_date"}, {"rejected", "too_many_decimals", "amount"}},
			message: "no such date", records: 0,
		},
		"rejected: a file with no rows, as a whole (row 0)": {
			file: file{rows: nil},
			want: []want{{"rejected", "no_rows", ""}}, message: "no data rows", records: 0,
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.unknownEmployee)
			if tc.before != nil {
				tc.before(t, h)
			}
			env, got := h.send(t, tc.file)
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
			if n := pgtest.Count(context.Background(), t, h.st, `SELECT count(*) FROM records`); n != tc.records {
				t.Errorf("%d records stored, want %d", n, tc.records)
			}
		})
	}
}
