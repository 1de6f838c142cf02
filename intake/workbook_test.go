package intake_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/workbook"
	"github.com/payintake/payintake/workbook/workbooktest"
)

// The same payroll as CSV and as a workbook (openpyxl's, notes sheet in
// front: the partner's sheet named) gives the same records: the workbook
// sent after the CSV is unchanged row for row, on the sheet's row numbers.
// Both orders are tried.
func TestWorkbookIsTheSamePayrollAsCSV(t *testing.T) {
	// The payroll sheet first: the sheet read by default.
	book := string(workbooktest.Openpyxl(t, workbooktest.Payroll, "PAYROLL_FIRST=1"))
	for _, order := range [][2]string{{"pay.csv", "pay-book.xlsx"}, {"pay-book.xlsx", "pay.csv"}} {
		t.Run(order[0]+" then "+order[1], func(t *testing.T) {
			f := newFixture(t, records.Partner{})
			file := map[string]string{"pay.csv": workbooktest.PayrollCSV, "pay-book.xlsx": book}
			_, first := f.ingest(order[0], file[order[0]])
			if first.Status != records.StatusProcessed || first.Counts["created"] != 4 || len(first.Counts) != 1 {
				t.Fatalf("%s: status %s counts %v, want 4 created:\n%s", order[0], first.Status, first.Counts, f.result(first))
			}
			_, second := f.ingest(order[1], file[order[1]])
			if second.Counts["unchanged"] != 4 || len(second.Counts) != 1 {
				t.Fatalf("%s after %s: counts %v, want 4 unchanged:\n%s", order[1], order[0], second.Counts, f.result(second))
			}
			var lines []string
			for _, r := range f.resultRows(second) {
				lines = append(lines, r["line"]+":"+r["employee_ref"])
			}
			if fmt.Sprint(lines) != "[2:00123 3:00124 5:00125 6:00126]" {
				t.Fatalf("result lines %v, want the sheet's rows 2 3 5 6 (row 4 is empty) with the references' leading zeros", lines)
			}
			if got := f.amount("00125", "2026-11", "BASE"); got != "100000.10" {
				t.Fatalf("amount of 00125 = %s, want 100000.10", got)
			}
		})
	}
}

// The sheet a partner's profile names is the one read (and previewed): openpyxl's
// workbook has a notes sheet first and the payroll on "Payroll", which the
// profile names (in another case: Excel ignores it too). A profile naming a
// sheet the workbook lacks gets the whole file refused (missing_sheet),
// naming the sheet asked for and the sheets there are.
func TestProfileNamesTheSheet(t *testing.T) {
	f := newFixture(t, records.Partner{})
	book := string(workbooktest.Openpyxl(t, workbooktest.Payroll))
	setSheet := func(sheet string) {
		t.Helper()
		if _, err := f.store.SetPartnerProfile(f.ctx, f.partner, "sheet: "+sheet, records.PartnerProfile{Sheet: sheet},
			records.PartnerUpdate{}, "tester", records.ViaCLI); err != nil {
			t.Fatal(err)
		}
	}
	setSheet("payroll")
	p, err := f.store.Partner(f.ctx, f.partner)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := f.in.PreviewFile(f.ctx, p, "pay.xlsx", strings.NewReader(book))
	if err != nil || fmt.Sprint(pv.Counts) != "map[created:4]" || len(pv.Rows) != 4 || pv.Rows[2].Line != 5 || pv.Rows[2].Values["employee_ref"] != "00125" {
		t.Fatalf("the workbook previewed: %+v (%v), want its 4 rows created, on the sheet's lines", pv, err)
	}
	if _, out := f.ingest("pay.xlsx", book); fmt.Sprint(out.Counts) != "map[created:4]" {
		t.Fatalf("the profile's sheet: %v, want 4 created:\n%s", out.Counts, f.result(out))
	}
	setSheet("Wages")
	p.Profile.Sheet = "Wages"
	if _, err := f.in.PreviewFile(f.ctx, p, "pay-2.xlsx", strings.NewReader(book)); !errors.Is(err, normalize.CodeMissingSheet) {
		t.Fatalf("the workbook previewed with a sheet it lacks: %v, want missing_sheet", err)
	}
	_, out := f.ingest("pay-2.xlsx", book)
	rows := f.resultRows(out)
	if len(rows) != 1 || rows[0]["row"] != "0" || rows[0]["code"] != string(normalize.CodeMissingSheet) ||
		!strings.Contains(rows[0]["message"], `no sheet named "Wages" (its sheets: "Notes", "Payroll")`) {
		t.Fatalf("a sheet the workbook lacks: %v, want the file refused with missing_sheet naming Wages, Notes and Payroll", rows)
	}
}

// An encrypted and signed workbook (pay.xlsx.gpg) is decrypted as it is
// read, copied to a temporary file (a zip archive is read at random) and
// read as the same workbook sent in the clear.
func TestEncryptedWorkbook(t *testing.T) {
	book := workbooktest.Openpyxl(t, workbooktest.Payroll, "PAYROLL_FIRST=1")
	st := pgtest.Store(t)
	in := intake.New(st, nil)
	s := newPGPSide(t, st, in, "acme", records.PGPAccept, "ed25519", false)
	got, out := s.ingest("pay.xlsx.gpg", s.Seal(book))
	if got.Status != records.StatusProcessed || fmt.Sprint(out.Counts) != "map[created:4]" {
		t.Fatalf("encrypted workbook: %s %v, want 4 created", got.Status, out.Counts)
	}
	_, plain := s.ingest("pay-clear.xlsx", book)
	if fmt.Sprint(plain.Counts) != "map[unchanged:4]" {
		t.Fatalf("the same workbook in the clear: %v, want 4 unchanged", plain.Counts)
	}
}

// A partner whose profile says results: xlsx is served its result as a
// workbook, NAME.result.xlsx, listed with the workbook's size: the same
// bytes every time and for a repeat, built from the stored result file,
// which stays CSV.
func TestResultWorkbookOfAnEnvelope(t *testing.T) {
	f := newFixture(t, records.Partner{})
	if _, err := f.store.SetPartnerProfile(f.ctx, f.partner, "results: xlsx", records.PartnerProfile{Results: "xlsx"},
		records.PartnerUpdate{}, "tester", records.ViaCLI); err != nil {
		t.Fatal(err)
	}
	_, out := f.ingest("pay.csv", workbooktest.PayrollCSV)
	var a, b, plain bytes.Buffer
	if err := f.store.WriteResult(f.ctx, out.ID, &a); err != nil {
		t.Fatal(err)
	}
	again, _ := f.ingest("pay.csv", workbooktest.PayrollCSV)
	if again.Status != records.StatusRepeat {
		t.Fatalf("the same file again: %s, want a repeat", again.Status)
	}
	if err := f.store.WriteResult(f.ctx, again.ID, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) || !bytes.HasPrefix(a.Bytes(), []byte("PK\x03\x04")) {
		t.Fatalf("the result and its repeat's: %d and %d bytes, equal %v; want the same zip archive", a.Len(), b.Len(), bytes.Equal(a.Bytes(), b.Bytes()))
	}
	if err := f.store.WritePlainResult(f.ctx, out.ID, &plain); err != nil || !strings.HasPrefix(plain.String(), records.ResultHeader) {
		t.Fatalf("the stored result: %q (%v), want the CSV lines", plain.String(), err)
	}
	ls, err := f.in.ResultFiles(f.ctx, f.partner)
	if err != nil || len(ls) != 1 || ls[0].Name != "pay.result.xlsx" || ls[0].Size != int64(a.Len()) {
		t.Fatalf("listing %+v (%v), want pay.result.xlsx of %d bytes", ls, err, a.Len())
	}
	if rf, err := f.in.ResultFileNamed(f.ctx, f.partner, "PAY.result.xlsx"); err != nil || rf.OutcomeID != out.ID {
		t.Fatalf("the workbook by name: %+v (%v)", rf, err)
	}
	if _, err := f.in.ResultFileNamed(f.ctx, f.partner, "pay.result.csv"); !errors.Is(err, intake.ErrNotFound) {
		t.Fatalf("the result under its CSV name: %v, want ErrNotFound (it is served as a workbook)", err)
	}
	path := filepath.Join(t.TempDir(), "pay.result.xlsx")
	if err := os.WriteFile(path, a.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got := workbooktest.Run(t, `
ws = load_workbook(os.environ["BOOK"]).active
print(ws.freeze_panes, [[c.value for c in row][:7] for row in ws.iter_rows(min_row=2, max_row=2)])
`, "OUT=unused", "BOOK="+path)
	if want := "A2 [[2, 1, 'created', '00123', '2026-11', 'BASE', 4000]]\n"; got != want {
		t.Fatalf("openpyxl reads %q, want %q", got, want)
	}
	// A file refused whole is a workbook of its one row too.
	_, refused := f.ingest("empty.csv", "")
	var c bytes.Buffer
	if err := f.store.WriteResult(f.ctx, refused.ID, &c); err != nil || int64(c.Len()) != refused.ResultSize || !bytes.HasPrefix(c.Bytes(), []byte("PK\x03\x04")) {
		t.Fatalf("the result of a file refused whole: %d bytes (%v), want a workbook of %d", c.Len(), err, refused.ResultSize)
	}
	if err := os.WriteFile(path, c.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got = workbooktest.Run(t, `
ws = load_workbook(os.environ["BOOK"]).active
print([[c.value for c in row][:3] + [row[8].value] for row in ws.iter_rows(min_row=2)])
`, "OUT=unused", "BOOK="+path)
	if want := "[[0, 0, 'rejected', 'empty_file']]\n"; got != want {
		t.Fatalf("openpyxl reads %q, want %q", got, want)
	}
}

// TestResultWorkbookIsBuiltOnce: a result workbook is built when the
// result is stored and its bytes are kept; every download (through each of
// intake's ways to a result) and a repeat read those bytes and build
// nothing. The proof: the stored result lines are changed underneath after
// processing, and the partner's profile set back to CSV results; a
// workbook built again would differ, yet every read gives the first
// bytes, which are the builder's workbook of the lines as processing
// stored them.
func TestResultWorkbookIsBuiltOnce(t *testing.T) {
	f := newFixture(t, records.Partner{})
	if _, err := f.store.SetPartnerProfile(f.ctx, f.partner, "results: xlsx", records.PartnerProfile{Results: "xlsx"},
		records.PartnerUpdate{}, "tester", records.ViaCLI); err != nil {
		t.Fatal(err)
	}
	got, out := f.ingest("pay.csv", workbooktest.PayrollCSV)
	var first, lines, built bytes.Buffer
	if err := f.store.WriteResult(f.ctx, out.ID, &first); err != nil {
		t.Fatal(err)
	}
	if err := f.store.WritePlainResult(f.ctx, out.ID, &lines); err != nil {
		t.Fatal(err)
	}
	if err := workbook.ResultWorkbook(&built, bytes.NewReader(lines.Bytes()), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), built.Bytes()) || int64(first.Len()) != out.ResultSize {
		t.Fatalf("the stored workbook: %d bytes (%d noted), the workbook of its lines %d; want the same bytes", first.Len(), out.ResultSize, built.Len())
	}

	// The lines changed underneath, and the profile back to CSV results.
	tag, err := f.store.Pool().Exec(f.ctx, `UPDATE envelope_results
		SET data = convert_to(replace(convert_from(data, 'UTF8'), 'created', 'CHANGED'), 'UTF8') WHERE envelope_id = $1`, out.ID)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("change the stored lines: %v (%d chunks)", err, tag.RowsAffected())
	}
	var rebuilt, changed bytes.Buffer
	if err := f.store.WritePlainResult(f.ctx, out.ID, &changed); err != nil || !strings.Contains(changed.String(), ",CHANGED,") {
		t.Fatalf("the changed lines: %q (%v)", changed.String(), err)
	}
	if err := workbook.ResultWorkbook(&rebuilt, &changed, ""); err != nil || bytes.Equal(rebuilt.Bytes(), first.Bytes()) {
		t.Fatalf("a workbook of the changed lines: equal to the first %v (%v); want other bytes, or the test proves nothing", bytes.Equal(rebuilt.Bytes(), first.Bytes()), err)
	}
	if _, err := f.store.SetPartnerProfile(f.ctx, f.partner, "results: csv", records.PartnerProfile{Results: "csv"},
		records.PartnerUpdate{}, "tester", records.ViaCLI); err != nil {
		t.Fatal(err)
	}

	again, _ := f.ingest("pay.csv", workbooktest.PayrollCSV)
	if again.Status != records.StatusRepeat {
		t.Fatalf("the same file again: %s, want a repeat", again.Status)
	}
	l, err := f.in.ResultFileNamed(f.ctx, f.partner, "pay.result.xlsx")
	if err != nil || l.Size != int64(first.Len()) {
		t.Fatalf("listed: %+v (%v), want pay.result.xlsx of %d bytes", l, err, first.Len())
	}
	byID, err := f.in.ResultFile(f.ctx, got, out, false)
	if err != nil || !byID.Workbook || byID.Size != int64(first.Len()) {
		t.Fatalf("the submission's result file: %+v (%v)", byID, err)
	}
	reads := map[string]func(w *bytes.Buffer) error{
		"listed (SFTP /results)":     func(w *bytes.Buffer) error { return f.in.StoredResult(l).WriteTo(f.ctx, w) },
		"the submission's (HTTP)":    func(w *bytes.Buffer) error { return byID.WriteTo(f.ctx, w) },
		"the repeat's (ingest)":      func(w *bytes.Buffer) error { return f.store.WriteResult(f.ctx, again.ID, w) },
		"the first's, again (store)": func(w *bytes.Buffer) error { return f.store.WriteResult(f.ctx, out.ID, w) },
	}
	for what, read := range reads {
		var b bytes.Buffer
		if err := read(&b); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !bytes.Equal(b.Bytes(), first.Bytes()) {
			t.Errorf("%s: %d bytes, not the first download's %d", what, b.Len(), first.Len())
		}
	}
}

// A file with more rows than a result workbook holds, from a partner whose
// results are workbooks, is refused whole, once, with
// too_many_rows_for_workbook: nothing of it applied, its processing not
// failed (so never retried), and a repeat of it given the same refusal.
// The engine's limit is lowered to 3 rows; a file of 3 is applied. Each
// way of applying a file meets the limit: a first file (read without
// staging), a resubmission (compared on its keys) and every file staged
// whole.
func TestWorkbookResultRowLimit(t *testing.T) {
	f := newFixture(t, records.Partner{})
	if _, err := f.store.SetPartnerProfile(f.ctx, f.partner, "results: xlsx", records.PartnerProfile{Results: "xlsx"},
		records.PartnerUpdate{}, "tester", records.ViaCLI); err != nil {
		t.Fatal(err)
	}
	payroll := func(period string, n int) string {
		var b strings.Builder
		b.WriteString("employee_ref,pay_period,component,amount,currency\n")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "E%03d,%s,BASE,%d.00,USD\n", i, period, 1000+i)
		}
		return b.String()
	}
	recordCount := func() int {
		t.Helper()
		var n int
		if err := f.store.Pool().QueryRow(f.ctx, `SELECT count(*) FROM records WHERE partner_id = $1`, f.partner).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	result := func(env records.Envelope) string {
		t.Helper()
		var b bytes.Buffer
		if err := f.store.WritePlainResult(f.ctx, env.ID, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	refused := func(what, name, content string) {
		t.Helper()
		before := recordCount()
		_, out := f.ingest(name, content)
		if out.Status != records.StatusProcessed || fmt.Sprint(out.Counts) != "map[rejected:1]" {
			t.Fatalf("%s: %s %v, want the file refused whole", what, out.Status, out.Counts)
		}
		lines := strings.Split(strings.TrimSuffix(result(out), "\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "5,0,rejected,,,,,,"+string(normalize.CodeTooManyRowsForWorkbook)+",,") ||
			!strings.Contains(lines[1], "more than 3 data rows") {
			t.Fatalf("%s: result %q, want one line rejecting the file at line 5 with %s", what, lines, normalize.CodeTooManyRowsForWorkbook)
		}
		if n := recordCount(); n != before {
			t.Fatalf("%s: %d records, %d before: want nothing applied", what, n, before)
		}
		var failures int
		if err := f.store.Pool().QueryRow(f.ctx, `SELECT count(*) FROM envelope_attempts WHERE envelope_id = $1`, out.ID).Scan(&failures); err != nil {
			t.Fatal(err)
		}
		if failures != 0 {
			t.Fatalf("%s: %d failed attempts recorded, want the refusal as the outcome of the first", what, failures)
		}
		// The refusal is the partner's result like any file's refused
		// whole: a workbook of its one row.
		var book bytes.Buffer
		if err := f.store.WriteResult(f.ctx, out.ID, &book); err != nil || out.ResultFormat != normalize.ResultsXLSX ||
			!bytes.HasPrefix(book.Bytes(), []byte("PK\x03\x04")) || int64(book.Len()) != out.ResultSize {
			t.Fatalf("%s: result %q of %d bytes (%d noted, %v), want a workbook", what, out.ResultFormat, book.Len(), out.ResultSize, err)
		}
		again, repeat := f.ingest(name, content)
		var second bytes.Buffer
		if err := f.store.WriteResult(f.ctx, repeat.ID, &second); err != nil {
			t.Fatal(err)
		}
		if again.Status != records.StatusRepeat || repeat.ID != out.ID || !bytes.Equal(second.Bytes(), book.Bytes()) || recordCount() != before {
			t.Fatalf("%s sent again: %s, outcome envelope %d (first %d), same result %v; want the stored refusal",
				what, again.Status, repeat.ID, out.ID, bytes.Equal(second.Bytes(), book.Bytes()))
		}
	}

	f.in.Engine = apply.New(f.store, apply.Options{WorkbookRows: 3})
	refused("a first file of 4 rows", "first.csv", payroll("2026-10", 4))
	if _, out := f.ingest("three.csv", payroll("2026-11", 3)); fmt.Sprint(out.Counts) != "map[created:3]" {
		t.Fatalf("a file of 3 rows: %v, want 3 created", out.Counts)
	}
	refused("a resubmission of 4 rows", "four.csv", payroll("2026-11", 4))
	f.in.Engine = apply.New(f.store, apply.Options{WorkbookRows: 3, StageWholeFiles: true})
	refused("a file of 4 rows staged whole", "staged.csv", payroll("2026-12", 4))

	// The preview gives the refusal an upload would get, and a file within
	// the limit its rows.
	p, err := f.store.Partner(f.ctx, f.partner)
	if err != nil {
		t.Fatal(err)
	}
	var fr *normalize.ParseError
	if _, err := f.in.PreviewFile(f.ctx, p, "preview.csv", strings.NewReader(payroll("2027-01", 4))); !errors.As(err, &fr) ||
		fr.Err != normalize.CodeTooManyRowsForWorkbook || fr.Line != 5 {
		t.Fatalf("preview of 4 rows: %v, want %s at line 5", err, normalize.CodeTooManyRowsForWorkbook)
	}
	if pv, err := f.in.PreviewFile(f.ctx, p, "preview.csv", strings.NewReader(payroll("2027-01", 3))); err != nil || len(pv.Rows) != 3 {
		t.Fatalf("preview of 3 rows: %v, %d rows; want 3", err, len(pv.Rows))
	}
}
