package apply_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// What each statement of applySQL writes, one keyed case per statement (and
// per condition in it), read back from the tables themselves.
func TestApplyStatements(t *testing.T) {
	ctx := context.Background()
	type sent struct {
		envs []records.Envelope
	}
	for name, tc := range map[string]struct {
		unknownEmployee string
		files           []applytest.File
		check           func(t *testing.T, h *applytest.Harness, s sent)
	}{
		"history: the replaced version is kept, replaced by the envelope": {
			files: []applytest.File{{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}, {Rows: []records.StagedRow{applytest.Row("E1", "150.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				var version, line int
				var amount, by string
				var env int64
				if err := h.Store.Pool().QueryRow(ctx, `SELECT version, amount::text, replaced_by, envelope_id, line FROM record_history`).
					Scan(&version, &amount, &by, &env, &line); err != nil {
					t.Fatal(err)
				}
				if version != 1 || amount != "100.00" || by != fmt.Sprintf("envelope %d", s.envs[1].ID) || env != s.envs[0].ID || line != 2 {
					t.Errorf("history: version %d amount %s replaced by %q envelope %d line %d; want version 1, 100.00, by envelope %d, written by envelope %d line 2",
						version, amount, by, env, line, s.envs[1].ID, s.envs[0].ID)
				}
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM record_history`); n != 1 {
					t.Errorf("%d history rows, want 1", n)
				}
			},
		},
		"update: the record takes the new values, the next version, the envelope and line": {
			files: []applytest.File{{Seq: seq(1), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}, {Seq: seq(2), Rows: []records.StagedRow{applytest.Row("E0", "5.00"), applytest.Row("E1", "150.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				r := h.Record(t, "E1")
				if r.Amount != "150.00" || r.Version != 2 {
					t.Errorf("record %+v, want amount 150.00 version 2", r)
				}
				var env int64
				var line, last int
				if err := h.Store.Pool().QueryRow(ctx, `SELECT envelope_id, line, last_seq FROM records WHERE id = $1`, r.ID).Scan(&env, &line, &last); err != nil {
					t.Fatal(err)
				}
				if env != s.envs[1].ID || line != 3 || last != 2 {
					t.Errorf("record written by envelope %d line %d seq %d, want envelope %d line 3 seq 2", env, line, last, s.envs[1].ID)
				}
			},
		},
		"unchanged: a newer sequence moves the record's sequence on, nothing else": {
			files: []applytest.File{{Seq: seq(5), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}, {Seq: seq(7), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				if n := pgtest.Count(ctx, t, h.Store, `SELECT last_seq FROM records`); n != 7 {
					t.Errorf("last_seq %d, want 7", n)
				}
				if n := pgtest.Count(ctx, t, h.Store, `SELECT version FROM records`); n != 1 {
					t.Errorf("version %d, want 1", n)
				}
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM record_history`); n != 0 {
					t.Errorf("%d history rows, want 0", n)
				}
			},
		},
		"unchanged: an older sequence leaves the record's sequence": {
			files: []applytest.File{{Seq: seq(5), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}, {Seq: seq(3), Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				if n := pgtest.Count(ctx, t, h.Store, `SELECT last_seq FROM records`); n != 5 {
					t.Errorf("last_seq %d, want 5", n)
				}
			},
		},
		"onboard: a created row's unknown employee gets the derived id": {
			files: []applytest.File{{Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Row("E2", "2.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM employees
					WHERE partner_id = 'acme' AND source = 'derived' AND employee_id = derived_employee_id('acme', employee_ref)`); n != 2 {
					t.Errorf("%d derived employees, want 2 (E1, E2)", n)
				}
			},
		},
		"onboard: only the references of created rows, when not every row is created": {
			files: []applytest.File{{Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Row("E2", "2.00"), applytest.Row("E2", "3.00"),
				applytest.Invalid("E3", "invalid_amount", "amount", "bad amount")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				var refs []string
				rows, err := h.Store.Pool().Query(ctx, `SELECT employee_ref FROM employees WHERE partner_id = 'acme' ORDER BY 1`)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var r string
					if err := rows.Scan(&r); err != nil {
						t.Fatal(err)
					}
					refs = append(refs, r)
				}
				if rows.Err() != nil {
					t.Fatal(rows.Err())
				}
				// E2's two rows repeat a key (rejected), E3's row is invalid.
				if !slices.Equal(refs, []string{"E1"}) {
					t.Errorf("employees onboarded %v, want [E1] (the only created row's)", refs)
				}
			},
		},
		"onboard: a first file's employees, not those of its invalid rows": {
			files: []applytest.File{{Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Invalid("E3", "invalid_amount", "amount", "bad amount")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM employees
					WHERE partner_id = 'acme' AND source = 'derived' AND employee_id = derived_employee_id('acme', employee_ref)`); n != 1 {
					t.Errorf("%d derived employees, want 1 (E1)", n)
				}
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM employees WHERE employee_ref = 'E3'`); n != 0 {
					t.Errorf("the invalid row's employee E3 was onboarded")
				}
			},
		},
		"onboard: a mapped employee keeps its mapping": {
			unknownEmployee: records.UnknownReject,
			files:           []applytest.File{{Rows: []records.StagedRow{applytest.Row("E1", "1.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				r := h.Record(t, "E1")
				if r.EmployeeID != "W-1" {
					t.Errorf("employee_id %q, want the imported W-1", r.EmployeeID)
				}
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM employees`); n != 1 {
					t.Errorf("%d employees, want the one imported", n)
				}
			},
		},
		"create: the record is version 1 with the file's sequence, envelope and line": {
			files: []applytest.File{{Seq: seq(4), Rows: []records.StagedRow{applytest.Row("E1", "1.00"), applytest.Row("E2", "2.50")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				var amount string
				var version, last, line int
				var env int64
				var locked *string
				if err := h.Store.Pool().QueryRow(ctx, `SELECT amount::text, version, last_seq, envelope_id, line, locked_reason FROM records WHERE employee_ref = 'E2'`).
					Scan(&amount, &version, &last, &env, &line, &locked); err != nil {
					t.Fatal(err)
				}
				if amount != "2.50" || version != 1 || last != 4 || env != s.envs[0].ID || line != 3 || locked != nil {
					t.Errorf("record E2: amount %s version %d seq %d envelope %d line %d locked %v; want 2.50, 1, 4, %d, 3, unlocked",
						amount, version, last, env, line, locked, s.envs[0].ID)
				}
			},
		},
		"exception: a held change opens one with what is and what is proposed": {
			files: []applytest.File{{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}, {Lock: true, Rows: []records.StagedRow{applytest.Row("E0", "1.00"), applytest.Row("E1", "150.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				xs, err := h.Store.Exceptions(ctx, records.ExceptionFilter{})
				if err != nil {
					t.Fatal(err)
				}
				if len(xs) != 2 {
					t.Fatalf("%d exceptions %+v, want 2 (E0 new key, E1 change)", len(xs), xs)
				}
				x := xs[1]
				if x.EmployeeRef != "E1" || x.Status != records.ExceptionOpen || x.Code != "record_locked" ||
					x.Current["amount"] != "100.00" || x.Proposed["amount"] != "150.00" || !slices.Equal(x.Differing, []string{"amount"}) ||
					x.EnvelopeID != s.envs[1].ID || x.Line != 3 {
					t.Errorf("exception %+v; want E1 open record_locked, amount 100.00 → 150.00, differing [amount], envelope %d line 3", x, s.envs[1].ID)
				}
				d, err := h.Store.ExceptionDetail(ctx, x.ID)
				if err != nil {
					t.Fatal(err)
				}
				if d.RowNo != 2 || d.RecordID == 0 {
					t.Errorf("exception row %d record %d, want row 2 and its record", d.RowNo, d.RecordID)
				}
				if n := xs[0]; n.EmployeeRef != "E0" || n.Code != "period_locked" || n.Current != nil || n.Proposed["amount"] != "1.00" {
					t.Errorf("new-key exception %+v, want E0 period_locked with no current", n)
				}
			},
		},
		"exception: the same held change again keeps the one open exception": {
			files: []applytest.File{{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}, {Lock: true, Rows: []records.StagedRow{applytest.Row("E1", "150.00")}},
				{Rows: []records.StagedRow{applytest.Row("E1", "150.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM exceptions`); n != 1 {
					t.Errorf("%d exceptions, want 1", n)
				}
				if n := pgtest.Count(ctx, t, h.Store, `SELECT count(*) FROM exceptions WHERE status = 'open' AND envelope_id = $1`, s.envs[1].ID); n != 1 {
					t.Errorf("the open exception is not the first file's")
				}
			},
		},
		"exception: a different held change supersedes the open one and is linked from it": {
			files: []applytest.File{{Rows: []records.StagedRow{applytest.Row("E1", "100.00")}}, {Lock: true, Rows: []records.StagedRow{applytest.Row("E1", "150.00")}},
				{Rows: []records.StagedRow{applytest.Row("E1", "175.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				xs, err := h.Store.Exceptions(ctx, records.ExceptionFilter{})
				if err != nil {
					t.Fatal(err)
				}
				if len(xs) != 2 {
					t.Fatalf("%d exceptions, want 2", len(xs))
				}
				old, cur := xs[0], xs[1]
				wantNote := fmt.Sprintf("superseded by a different change in envelope %d, line 2", s.envs[2].ID)
				if old.Status != records.ExceptionSuperseded || old.Note != wantNote || old.DecidedAt == nil {
					t.Errorf("first exception %s %q, want superseded %q", old.Status, old.Note, wantNote)
				}
				if cur.Status != records.ExceptionOpen || cur.Proposed["amount"] != "175.00" {
					t.Errorf("second exception %s %v, want open proposing 175.00", cur.Status, cur.Proposed)
				}
				d, err := h.Store.ExceptionDetail(ctx, old.ID)
				if err != nil {
					t.Fatal(err)
				}
				if d.SupersededBy != cur.ID {
					t.Errorf("superseded_by %d, want %d", d.SupersededBy, cur.ID)
				}
			},
		},
		"result: the header, then one line per row in file order": {
			files: []applytest.File{{Rows: []records.StagedRow{applytest.Row("E2", "2.00"), applytest.Invalid("E3", "bad_amount", "amount", "not a number"), applytest.Row("E1", "1.00")}}},
			check: func(t *testing.T, h *applytest.Harness, s sent) {
				var b bytes.Buffer
				if err := h.Store.WriteResult(ctx, s.envs[0].ID, &b); err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
				want := []string{strings.TrimSuffix(records.ResultHeader, "\n"),
					"2,1,created,E2,2026-11,BASE,2.00,USD,,,",
					"3,2,rejected,E3,2026-11,BASE,x,USD,bad_amount,amount,not a number",
					"4,3,created,E1,2026-11,BASE,1.00,USD,,,"}
				if !slices.Equal(lines, want) {
					t.Errorf("result file:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
				}
				if s.envs[0].ResultSize != int64(b.Len()) {
					t.Errorf("result_size %d, the file has %d bytes", s.envs[0].ResultSize, b.Len())
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := applytest.New(t, tc.unknownEmployee)
			if tc.unknownEmployee == records.UnknownReject {
				if _, err := h.Store.ImportEmployees(ctx, h.Partner, []records.EmployeeMapping{{Line: 2, EmployeeRef: "E1", EmployeeID: "W-1"}}); err != nil {
					t.Fatal(err)
				}
			}
			var s sent
			for _, f := range tc.files {
				env, _ := h.Send(t, f)
				s.envs = append(s.envs, env)
			}
			tc.check(t, h, s)
		})
	}
}
