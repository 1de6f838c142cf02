package intake_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/payintake/payintake/records"
)

// TestPreviewIsWhatProcessingDoes: a file with a row of each outcome the
// preview tells (created, updated, unchanged, held for a locked record, a
// closed period or an unknown employee, rejected for its values, an
// unmapped code, a key twice or an unknown employee whose derived id is
// taken) is previewed, then processed: every row
// gets the outcome and code the preview said, and the preview wrote
// nothing (the partner's envelopes and records are as they were).
func TestPreviewIsWhatProcessingDoes(t *testing.T) {
	f := newFixture(t, records.Partner{ID: "acme", UnknownEmployee: records.UnknownHold})
	if _, err := f.store.ImportEmployees(f.ctx, f.partner, []records.EmployeeMapping{
		{Line: 2, EmployeeRef: "00042", EmployeeID: "emp-42"}, {Line: 3, EmployeeRef: "00043", EmployeeID: "emp-43"}}); err != nil {
		t.Fatal(err)
	}
	// 00044 has the id 00077 would be given, so 00077, unmapped, is
	// rejected whatever the policy (its derived id is taken).
	if _, err := f.store.Pool().Exec(f.ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		VALUES ($1, '00044', derived_employee_id($1, '00077'), 'derived')`, f.partner); err != nil {
		t.Fatal(err)
	}
	semi := ";"
	pr := records.PartnerProfile{Columns: map[string][]string{"employee_ref": {"Emp No"}, "pay_period": {"Period"},
		"component": {"Earning Code"}, "amount": {"Gross Pay"}, "currency": {"Curr"}},
		Components: map[string]string{"REG": "BASE", "OT": "OVERTIME", "BON": "BONUS"}, UnknownComponent: "reject"}
	if _, err := f.store.SetPartnerProfile(f.ctx, f.partner, "(test)", pr, records.PartnerUpdate{Delimiter: &semi}, "tester", records.ViaCLI); err != nil {
		t.Fatal(err)
	}
	const head = "Emp No;Period;Earning Code;Gross Pay;Curr\n"
	f.ingest("first.csv", head+
		"00042;2026-10;REG;100.00;EUR\n"+
		"00042;2026-11;REG;100.00;EUR\n"+
		"00042;2026-11;OT;10.00;EUR\n"+
		"00043;2026-11;REG;200.00;EUR\n")
	if _, err := f.store.LockPeriod(f.ctx, f.partner, "2026-10", records.LockPaid, "tester"); err != nil {
		t.Fatal(err)
	}
	second := head +
		"00042;2026-11;REG;100.00;EUR\n" + // unchanged
		"00042;2026-11;OT;12.00;EUR\n" + // updated
		"00043;2026-11;BON;50.00;EUR\n" + // created
		"00042;2026-10;REG;120.00;EUR\n" + // held: record_locked
		"00043;2026-10;REG;120.00;EUR\n" + // held: period_locked
		"00099;2026-11;REG;1.00;EUR\n" + // held: unknown_employee
		"00043;2026-11;XMAS;5.00;EUR\n" + // rejected: unknown_component
		"00043;2026-11;OT;1.234;EUR\n" + // rejected: too_many_decimals
		"00043;2026-12;REG;1.00;EUR\n" + // rejected: duplicate_key_in_file
		"00043;2026-12;REG;2.00;EUR\n" + // rejected: duplicate_key_in_file
		"00077;2026-11;REG;1.00;EUR\n" // rejected: unknown_employee (its derived id taken)
	p, err := f.store.Partner(f.ctx, f.partner)
	if err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprint(f.count(`SELECT count(*) FROM envelopes`), f.count(`SELECT count(*) FROM records`), f.count(`SELECT count(*) FROM exceptions`))
	pv, err := f.in.PreviewFile(f.ctx, p, "second.csv", strings.NewReader(second))
	if err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprint(f.count(`SELECT count(*) FROM envelopes`), f.count(`SELECT count(*) FROM records`), f.count(`SELECT count(*) FROM exceptions`)); after != before {
		t.Fatalf("the preview wrote: %s → %s", before, after)
	}
	_, out := f.ingest("second.csv", second)
	rows := f.resultRows(out)
	if len(rows) != len(pv.Rows) {
		t.Fatalf("preview has %d rows, processing %d", len(pv.Rows), len(rows))
	}
	want := []string{"unchanged/", "updated/", "created/", "held/record_locked", "held/period_locked", "held/unknown_employee",
		"rejected/unknown_component", "rejected/too_many_decimals", "rejected/duplicate_key_in_file", "rejected/duplicate_key_in_file",
		"rejected/unknown_employee"}
	for i, r := range rows {
		got, said := r["outcome"]+"/"+r["code"], pv.Rows[i].Outcome+"/"+pv.Rows[i].Code
		if said != got || got != want[i] {
			t.Errorf("row %d: preview said %s, processing gave %s, want %s", i+1, said, got, want[i])
		}
		if pv.Rows[i].Values["component"] != r["component"] {
			t.Errorf("row %d: preview shows component %q, the result %q", i+1, pv.Rows[i].Values["component"], r["component"])
		}
	}
	if pv.ProfileVersion != 1 || pv.Profile != "partner profile acme (version 1)" {
		t.Errorf("preview read with %q (version %d)", pv.Profile, pv.ProfileVersion)
	}
}

// An all-or-nothing file with a rejected row: the preview, like
// processing, rejects the others (file_rejected).
func TestPreviewAllOrNothing(t *testing.T) {
	f := newFixture(t, records.Partner{ID: "acme", Mode: records.ModeAllOrNothing})
	file := "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,10.00,USD\nE2,2026-11,BASE,1.234,USD\nE3,2026-11,BASE,3.00,USD\n"
	p, err := f.store.Partner(f.ctx, f.partner)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := f.in.PreviewFile(f.ctx, p, "file.csv", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	_, out := f.ingest("aon.csv", file)
	rows := f.resultRows(out)
	want := []string{"rejected/file_rejected", "rejected/too_many_decimals", "rejected/file_rejected"}
	for i, r := range rows {
		got, said := r["outcome"]+"/"+r["code"], pv.Rows[i].Outcome+"/"+pv.Rows[i].Code
		if said != got || got != want[i] {
			t.Errorf("row %d: preview said %s, processing gave %s, want %s", i+1, said, got, want[i])
		}
	}
}
