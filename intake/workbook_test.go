package intake_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
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

// A result as a workbook is the same bytes every time (a replay serves
// the first result's), made from the stored result file.
func TestResultWorkbookOfAnEnvelope(t *testing.T) {
	f := newFixture(t, records.Partner{})
	_, out := f.ingest("pay.csv", workbooktest.PayrollCSV)
	var a, b bytes.Buffer
	if err := f.in.WriteResultWorkbook(f.ctx, out.ID, &a); err != nil {
		t.Fatal(err)
	}
	if err := f.in.WriteResultWorkbook(f.ctx, out.ID, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) || !bytes.HasPrefix(a.Bytes(), []byte("PK\x03\x04")) {
		t.Fatalf("two workbooks of one result: %d and %d bytes, equal %v; want the same zip archive", a.Len(), b.Len(), bytes.Equal(a.Bytes(), b.Bytes()))
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
}
