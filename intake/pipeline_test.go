package intake_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// fixture is one test's database with one partner.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	store   *records.Store
	in      *intake.Intake
	partner string
	dir     string
}

func newFixture(t *testing.T, p records.Partner) *fixture {
	t.Helper()
	st := pgtest.Store(t)
	if p.ID == "" {
		p.ID = "acme"
	}
	ctx := context.Background()
	if err := st.AddPartner(ctx, p); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, store: st, in: intake.New(st, nil), partner: p.ID, dir: t.TempDir()}
}

// ingest sends content as a file called name and returns the received and the outcome envelopes.
func (f *fixture) ingest(name, content string) (got, out records.Envelope) {
	f.t.Helper()
	dir, err := os.MkdirTemp(f.dir, "up")
	if err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	got, out, err = f.in.IngestFile(f.ctx, f.partner, path, "test")
	if err != nil {
		f.t.Fatalf("ingest %s: %v", name, err)
	}
	return got, out
}

// sample reads a file of sample-files/.
func sample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "sample-files", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) result(env records.Envelope) string {
	f.t.Helper()
	var b bytes.Buffer
	if err := f.store.WriteResult(f.ctx, env.ID, &b); err != nil {
		f.t.Fatalf("result of envelope %d: %v", env.ID, err)
	}
	return b.String()
}

// resultRows parses a result file and checks its header.
func (f *fixture) resultRows(env records.Envelope) []map[string]string {
	f.t.Helper()
	rows, err := csv.NewReader(strings.NewReader(f.result(env))).ReadAll()
	if err != nil {
		f.t.Fatalf("result file is not CSV: %v", err)
	}
	want := strings.Split(strings.TrimSpace(records.ResultHeader), ",")
	if strings.Join(rows[0], ",") != "line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message" {
		f.t.Fatalf("header = %q, want %q", rows[0], want)
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			m[h] = r[i]
		}
		out = append(out, m)
	}
	return out
}

func (f *fixture) count(query string, args ...any) int {
	f.t.Helper()
	return pgtest.Count(f.ctx, f.t, f.store, query, args...)
}

func (f *fixture) amount(employee, period, component string) string {
	f.t.Helper()
	r, err := f.store.FindRecord(f.ctx, f.partner, employee, period, component)
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Amount
}

const cleanResult = `line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message
2,1,created,E00101,2026-11,BASE,4000.00,USD,,,
3,2,created,E00101,2026-11,OVERTIME,375.00,USD,,,
4,3,created,E00102,2026-11,BASE,5200.00,USD,,,
5,4,created,E00102,2026-11,BONUS,500.00,USD,,,
6,5,created,E00103,2026-11,BASE,3120.00,USD,,,
7,6,created,E00104,2026-11,BASE,6080.00,USD,,,
8,7,created,E00104,2026-11,DEDUCTION_401K,-304.00,USD,,,
9,8,created,E00105,2026-11,BASE,4480.00,USD,,,
`

func TestCleanFirstRun(t *testing.T) {
	f := newFixture(t, records.Partner{})
	got, out := f.ingest("clean-first-run.csv", sample(t, "clean-first-run.csv"))
	if got.Status != records.StatusProcessed || out.ID != got.ID {
		t.Fatalf("status %s, want processed", got.Status)
	}
	if r := f.result(out); r != cleanResult {
		t.Errorf("result:\n%s\nwant:\n%s", r, cleanResult)
	}
	if out.Counts["created"] != 8 || len(out.Counts) != 1 {
		t.Errorf("counts %v, want created=8", out.Counts)
	}
	if n := f.count(`SELECT count(*) FROM records`); n != 8 {
		t.Errorf("%d records, want 8", n)
	}
	// The original bytes are kept for audit, byte for byte.
	var kept []byte
	if err := f.store.Pool().QueryRow(f.ctx, `SELECT string_agg(data, ''::bytea ORDER BY n) FROM envelope_chunks WHERE envelope_id = $1`, got.ID).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if string(kept) != sample(t, "clean-first-run.csv") {
		t.Error("stored bytes differ from the file")
	}
}

func TestCorrectedResubmissionUpdatesAndKeepsHistory(t *testing.T) {
	f := newFixture(t, records.Partner{})
	f.ingest("clean-first-run.csv", sample(t, "clean-first-run.csv"))
	_, out := f.ingest("corrected-resubmission.csv", sample(t, "corrected-resubmission.csv"))
	// Formatting-only differences ("4,000" and "usd", "160.0", "(304.00)",
	// padded employee_ref) are unchanged; only the bonus changed.
	want := `line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message
2,1,unchanged,E00101,2026-11,BASE,4000.00,USD,,,
3,2,unchanged,E00101,2026-11,OVERTIME,375.00,USD,,,
4,3,unchanged,E00102,2026-11,BASE,5200.00,USD,,,
5,4,updated,E00102,2026-11,BONUS,650.00,USD,,,
6,5,unchanged,E00103,2026-11,BASE,3120.00,USD,,,
7,6,unchanged,E00104,2026-11,BASE,6080.00,USD,,,
8,7,unchanged,E00104,2026-11,DEDUCTION_401K,-304.00,USD,,,
9,8,unchanged,E00105,2026-11,BASE,4480.00,USD,,,
10,9,created,E00106,2026-11,BASE,3900.00,USD,,,
`
	if r := f.result(out); r != want {
		t.Errorf("result:\n%s\nwant:\n%s", r, want)
	}
	if a := f.amount("E00102", "2026-11", "BONUS"); a != "650.00" {
		t.Errorf("bonus = %s, want 650.00", a)
	}
	var oldAmount string
	var version int
	err := f.store.Pool().QueryRow(f.ctx, `SELECT h.amount::text, h.version FROM record_history h JOIN records r ON r.id = h.record_id
		WHERE r.employee_ref = 'E00102' AND r.component = 'BONUS'`).Scan(&oldAmount, &version)
	if err != nil {
		t.Fatal(err)
	}
	if oldAmount != "500.00" || version != 1 {
		t.Errorf("history holds %s v%d, want 500.00 v1", oldAmount, version)
	}
	if n := f.count(`SELECT count(*) FROM record_history`); n != 1 {
		t.Errorf("%d history rows, want 1 (only the bonus changed)", n)
	}
}

func TestMessyExport(t *testing.T) {
	f := newFixture(t, records.Partner{})
	_, out := f.ingest("messy-export.csv", sample(t, "messy-export.csv"))
	want := `line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message
2,1,created,E00201,2026-11,BASE,1234.50,USD,,,
3,2,created,E00202,2026-11,BASE,2450.00,USD,,,
4,3,created,E00202,2026-11,DEDUCTION,-50.00,USD,,,
5,4,created,E00203,2026-11,BASE,3100.00,USD,,,
6,5,created,E00204,2026-11,BONUS,250.00,USD,,,
`
	if r := f.result(out); r != want {
		t.Errorf("result:\n%s\nwant:\n%s", r, want)
	}
}

func TestBadRows(t *testing.T) {
	f := newFixture(t, records.Partner{})
	_, out := f.ingest("bad-rows.csv", sample(t, "bad-rows.csv"))
	rows := f.resultRows(out)
	want := []struct{ line, outcome, code, field, employee, amount string }{
		{"2", "created", "", "", "E00301", "3000.00"},
		{"3", "rejected", "mangled_identifier", "employee_ref", "1.23E+05", "2500.00"},
		{"4", "rejected", "too_many_decimals", "amount", "E00302", "12.345"},
		{"5", "rejected", "invalid_date", "pay_date", "E00303", "1500.00"},
		{"6", "rejected", "invalid_amount", "amount", "E00304", "'=1+1"}, // formula escaped
		{"7", "rejected", "invalid_currency", "currency", "E00305", "2000.00"},
		{"8", "rejected", "invalid_amount", "amount", "E00306", "1e3"},
		{"9", "rejected", "duplicate_key_in_file", "", "E00307", "2100.00"},
		{"10", "rejected", "duplicate_key_in_file", "", "E00307", "2200.00"},
		{"11", "rejected", "missing_value", "employee_ref", "", "100.00"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d result rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		if r["line"] != w.line || r["row"] != strings.TrimSpace(string(rune('0'+i+1))) && i < 9 {
			t.Errorf("row %d: line %s row %s, want line %s", i+1, r["line"], r["row"], w.line)
		}
		if r["outcome"] != w.outcome || r["code"] != w.code || r["field"] != w.field {
			t.Errorf("line %s: %s/%s/%s, want %s/%s/%s", w.line, r["outcome"], r["code"], r["field"], w.outcome, w.code, w.field)
		}
		if r["employee_ref"] != w.employee || r["amount"] != w.amount {
			t.Errorf("line %s echoes %q %q, want %q %q", w.line, r["employee_ref"], r["amount"], w.employee, w.amount)
		}
		if w.code != "" && len(r["message"]) < 20 {
			t.Errorf("line %s: message %q does not tell the partner what to do", w.line, r["message"])
		}
	}
	if !strings.Contains(rows[7]["message"], "9, 10") {
		t.Errorf("duplicate message should name both lines: %q", rows[7]["message"])
	}
	if n := f.count(`SELECT count(*) FROM records`); n != 1 {
		t.Errorf("%d records, want only the one valid row", n)
	}
}

func TestSameFileTwiceIsARepeat(t *testing.T) {
	f := newFixture(t, records.Partner{})
	_, first := f.ingest("clean-first-run.csv", sample(t, "clean-first-run.csv"))
	r1 := f.result(first)
	got, out := f.ingest("clean-first-run.csv", sample(t, "clean-first-run.csv"))
	if got.Status != records.StatusRepeat || got.RepeatOf != first.ID || out.ID != first.ID {
		t.Fatalf("second upload: status %s replay_of %d, want a repeat of %d", got.Status, got.RepeatOf, first.ID)
	}
	if r2 := f.result(got); r2 != r1 {
		t.Errorf("the repeat's result differs:\n%s\nfirst:\n%s", r2, r1)
	}
	// Case-folded key: the same name in other case is the same submission.
	got3, _ := f.ingest("CLEAN-First-Run.CSV", sample(t, "clean-first-run.csv"))
	if got3.Status != records.StatusRepeat {
		t.Errorf("name in other case: status %s, want a repeat", got3.Status)
	}
	if n := f.count(`SELECT count(*) FROM records WHERE version > 1`); n != 0 {
		t.Errorf("%d records were written again", n)
	}
	if n := f.count(`SELECT count(*) FROM envelope_chunks WHERE envelope_id <> $1`, first.ID); n != 0 {
		t.Errorf("replays stored their bytes again (%d chunks)", n)
	}
}

func TestSameFileAtTheSameMomentIsAppliedOnce(t *testing.T) {
	f := newFixture(t, records.Partner{})
	content := sample(t, "clean-first-run.csv")
	const n = 8
	results := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := t.TempDir()
			path := filepath.Join(dir, "clean-first-run.csv")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Error(err)
				return
			}
			got, _, err := f.in.IngestFile(f.ctx, f.partner, path, "test")
			if err != nil {
				t.Error(err)
				return
			}
			var b bytes.Buffer
			if err := f.store.WriteResult(f.ctx, got.ID, &b); err != nil {
				t.Error(err)
			}
			results[i] = b.String()
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r != cleanResult {
			t.Errorf("upload %d got result:\n%s", i, r)
		}
	}
	if c := f.count(`SELECT count(*) FROM envelopes WHERE status = 'processed'`); c != 1 {
		t.Errorf("%d envelopes processed, want 1", c)
	}
	if c := f.count(`SELECT count(*) FROM envelopes WHERE status = 'replay'`); c != n-1 {
		t.Errorf("%d replays, want %d", c, n-1)
	}
	if c := f.count(`SELECT count(*) FROM records`); c != 8 {
		t.Errorf("%d records, want 8", c)
	}
}

func TestSameNameDifferentBytesIsRejectedLoudly(t *testing.T) {
	f := newFixture(t, records.Partner{})
	_, first := f.ingest("run.csv", sample(t, "clean-first-run.csv"))
	got, _ := f.ingest("run.csv", sample(t, "corrected-resubmission.csv"))
	if got.Status != records.StatusKeyReuse {
		t.Fatalf("status %s, want key_reuse", got.Status)
	}
	rows := f.resultRows(got)
	if len(rows) != 1 || rows[0]["row"] != "0" || rows[0]["outcome"] != "rejected" || rows[0]["code"] != "idempotency_key_reuse" {
		t.Fatalf("result rows %v, want one row 0 rejected idempotency_key_reuse", rows)
	}
	if !strings.Contains(rows[0]["message"], "new file name") {
		t.Errorf("message %q should say to use a new file name", rows[0]["message"])
	}
	if a := f.amount("E00102", "2026-11", "BONUS"); a != "500.00" {
		t.Errorf("bonus = %s: the rejected file was applied", a)
	}
	if n := f.count(`SELECT count(*) FROM records`); n != 8 {
		t.Errorf("%d records, want 8", n)
	}
	// Its bytes are kept for audit all the same.
	if n := f.count(`SELECT count(*) FROM envelope_chunks WHERE envelope_id = $1`, got.ID); n != 1 {
		t.Errorf("rejected file's bytes not kept")
	}
	// And the first result is still served for the first envelope.
	if f.result(first) != cleanResult {
		t.Error("first result changed")
	}
}

func TestLockedPeriodHoldsChanges(t *testing.T) {
	f := newFixture(t, records.Partner{})
	f.ingest("clean-first-run.csv", sample(t, "clean-first-run.csv"))
	n, err := f.store.LockPeriod(f.ctx, f.partner, "2026-11", records.LockPaid, "tester")
	if err != nil || n != 8 {
		t.Fatalf("lock: %d records, %v", n, err)
	}
	_, out := f.ingest("corrected-resubmission.csv", sample(t, "corrected-resubmission.csv"))
	rows := f.resultRows(out)
	if rows[3]["outcome"] != "held" || rows[3]["code"] != "record_locked" {
		t.Errorf("changed bonus: %s/%s, want held/record_locked", rows[3]["outcome"], rows[3]["code"])
	}
	if rows[8]["outcome"] != "held" || rows[8]["code"] != "period_locked" {
		t.Errorf("new line in closed period: %s/%s, want held/period_locked", rows[8]["outcome"], rows[8]["code"])
	}
	if rows[0]["outcome"] != "unchanged" {
		t.Errorf("identical row in locked period: %s, want unchanged", rows[0]["outcome"])
	}
	if a := f.amount("E00102", "2026-11", "BONUS"); a != "500.00" {
		t.Errorf("locked bonus overwritten: %s", a)
	}
	if _, err := f.store.FindRecord(f.ctx, f.partner, "E00106", "2026-11", "BASE"); err == nil {
		t.Error("a new record was created in a closed period")
	}
	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: f.partner, Status: "open"})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 2 {
		t.Fatalf("%d open exceptions, want 2", len(xs))
	}
	x := xs[0]
	if x.Code != "record_locked" || x.Current["amount"] != "500.00" || x.Proposed["amount"] != "650.00" ||
		len(x.Differing) != 1 || x.Differing[0] != "amount" || x.File != "corrected-resubmission.csv" || x.Line != 5 {
		t.Errorf("exception %+v", x)
	}
	if xs[1].Code != "period_locked" || xs[1].Current != nil || xs[1].Proposed["amount"] != "3900.00" {
		t.Errorf("exception %+v", xs[1])
	}
}

func TestExceptionsAreSupersededNotDuplicated(t *testing.T) {
	f := newFixture(t, records.Partner{})
	f.ingest("a.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,100.00,USD\n")
	if _, err := f.store.LockPeriod(f.ctx, f.partner, "2026-11", records.LockApproved, "tester"); err != nil {
		t.Fatal(err)
	}
	f.ingest("b.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,110.00,USD\n")
	f.ingest("c.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,110.00,USD\n") // same proposal again
	all, _ := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: f.partner})
	if len(all) != 1 || all[0].Status != "open" {
		t.Fatalf("after an identical re-proposal: %d exceptions, want 1 open", len(all))
	}
	f.ingest("d.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,120.00,USD\n")
	all, _ = f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: f.partner})
	if len(all) != 2 || all[0].Status != "superseded" || all[1].Status != "open" || all[1].Proposed["amount"] != "120.00" {
		t.Fatalf("after a different proposal: %+v", all)
	}
	if a := f.amount("E1", "2026-11", "BASE"); a != "100.00" {
		t.Errorf("locked record changed to %s", a)
	}
}

func TestOlderSequenceIsStale(t *testing.T) {
	f := newFixture(t, records.Partner{FilePattern: `^run-(?P<seq>\d+)\.csv$`})
	f.ingest("run-002.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,200.00,USD\nE2,2026-11,BASE,50.00,USD\n")
	_, out := f.ingest("run-001.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,100.00,USD\nE3,2026-11,BASE,70.00,USD\n")
	rows := f.resultRows(out)
	if rows[0]["outcome"] != "stale" || rows[0]["code"] != "superseded" {
		t.Errorf("older file's change: %s/%s, want stale/superseded", rows[0]["outcome"], rows[0]["code"])
	}
	if rows[1]["outcome"] != "created" {
		t.Errorf("older file's new key: %s, want created", rows[1]["outcome"])
	}
	if a := f.amount("E1", "2026-11", "BASE"); a != "200.00" {
		t.Errorf("stale row applied: %s", a)
	}
	// A newer file still updates.
	_, out = f.ingest("run-003.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,300.00,USD\n")
	if r := f.resultRows(out); r[0]["outcome"] != "updated" {
		t.Errorf("newer file: %s, want updated", r[0]["outcome"])
	}
	// A name outside the agreed pattern is rejected as a whole.
	_, out = f.ingest("payroll.csv", "employee_ref,pay_period,component,amount,currency\nE9,2026-11,BASE,1.00,USD\n")
	if r := f.resultRows(out); len(r) != 1 || r[0]["code"] != "file_name_mismatch" || r[0]["row"] != "0" {
		t.Errorf("mismatched name: %v", r)
	}
}

func TestAllOrNothing(t *testing.T) {
	f := newFixture(t, records.Partner{Mode: records.ModeAllOrNothing})
	_, out := f.ingest("bad.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,100.00,USD\nE2,2026-11,BASE,abc,USD\n")
	rows := f.resultRows(out)
	if rows[0]["outcome"] != "rejected" || rows[0]["code"] != "file_rejected" || rows[1]["code"] != "invalid_amount" {
		t.Errorf("rows %v", rows)
	}
	if n := f.count(`SELECT count(*) FROM records`); n != 0 {
		t.Errorf("%d records applied from a rejected all-or-nothing file", n)
	}
	_, out = f.ingest("dup.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,100.00,USD\nE1,2026-11,BASE,100.00,USD\nE2,2026-11,BASE,1.00,USD\n")
	rows = f.resultRows(out)
	if rows[2]["code"] != "file_rejected" || rows[0]["code"] != "duplicate_key_in_file" {
		t.Errorf("rows %v", rows)
	}
	_, out = f.ingest("good.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,100.00,USD\n")
	if out.Counts["created"] != 1 {
		t.Errorf("a clean file: %v", out.Counts)
	}
}

func TestFileLevelRejections(t *testing.T) {
	f := newFixture(t, records.Partner{})
	cases := []struct{ name, content, code string }{
		{"empty.csv", "", "empty_file"},
		{"header-only.csv", "employee_ref,pay_period,component,amount,currency\n", "no_rows"},
		{"no-amount.csv", "employee_ref,pay_period,component,currency\nE1,2026-11,BASE,USD\n", "missing_column"},
		{"latin1.csv", "employee_ref,pay_period,component,amount,currency\nJos\xe9,2026-11,BASE,1.00,USD\n", "invalid_encoding"},
	}
	for _, c := range cases {
		_, out := f.ingest(c.name, c.content)
		rows := f.resultRows(out)
		if len(rows) != 1 || rows[0]["row"] != "0" || rows[0]["outcome"] != "rejected" || rows[0]["code"] != c.code {
			t.Errorf("%s: %v, want one row 0 rejected %s", c.name, rows, c.code)
		}
	}
	if n := f.count(`SELECT count(*) FROM records`); n != 0 {
		t.Errorf("%d records from rejected files", n)
	}
}

func TestFormulaLookingValuesAreEscapedInTheResult(t *testing.T) {
	f := newFixture(t, records.Partner{})
	_, out := f.ingest("f.csv", "employee_ref,pay_period,component,amount,currency\n@SUM(A1),2026-11,BASE,1.00,USD\n")
	rows := f.resultRows(out)
	if rows[0]["outcome"] != "created" || rows[0]["employee_ref"] != "'@SUM(A1)" {
		t.Errorf("row %v: want created with escaped echo", rows[0])
	}
	// The record itself keeps the value as sent.
	if a := f.amount("@SUM(A1)", "2026-11", "BASE"); a != "1.00" {
		t.Errorf("amount %s", a)
	}
}
