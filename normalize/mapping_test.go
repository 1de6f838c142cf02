package normalize

import (
	"errors"
	"strings"
	"testing"
)

// A field the profile maps is read under its headers only: the file's
// column named like the field is another column of the partner's.
func TestMappedFieldIgnoresItsOwnName(t *testing.T) {
	s := Settings{Columns: map[string][]string{FieldAmount: {"Gross Pay"}}, Profile: "partner profile p (version 2)"}
	rows, err := readAll(t, strings.NewReader("employee_ref,pay_period,component,amount,gross-pay,currency\nE1,2026-03,BASE,99.00,100.00,USD\n"), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Err != nil || rows[0].Record.AmountString() != "100.00" {
		t.Fatalf("rows = %+v, want amount 100.00 from Gross Pay", rows)
	}
	_, err = readAll(t, strings.NewReader("employee_ref,pay_period,component,amount,currency\nE1,2026-03,BASE,99.00,USD\n"), s)
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, CodeMissingColumn) || pe.Field != FieldAmount ||
		!strings.Contains(pe.Message, `partner profile p (version 2) names it "Gross Pay"`) {
		t.Fatalf("without Gross Pay: %v, want missing_column naming the profile's header", err)
	}
	// Two of a field's headers in one file are one column twice.
	s.Columns[FieldEmployeeRef] = []string{"Emp No", "Employee Number"}
	_, err = readAll(t, strings.NewReader("Emp No,EMPLOYEE_NUMBER,pay_period,component,gross pay,currency\n1,1,2026-03,BASE,1,USD\n"), s)
	if !errors.Is(err, CodeDuplicateColumn) {
		t.Fatalf("two headers of employee_ref: %v, want duplicate_column", err)
	}
}

// The record, and so its hash, is payintake's: a code mapped to BASE and
// BASE sent as it is are one record.
func TestMappedComponentHashesAsTheComponent(t *testing.T) {
	plain, err := readAll(t, strings.NewReader("employee_ref,pay_period,component,amount,currency\nE1,2026-03,BASE,10.00,USD\n"), Settings{})
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := readAll(t, strings.NewReader("Emp No;Period;Earning Code;Gross Pay;currency\nE1;2026-03; reg ;10,00;USD\n"), Settings{
		DecimalComma: true, Components: map[string]string{"REG": "BASE"}, UnknownComponent: UnknownComponentReject,
		Columns: map[string][]string{FieldEmployeeRef: {"Emp No"}, FieldPayPeriod: {"Period"}, FieldComponent: {"Earning Code"}, FieldAmount: {"Gross Pay"}}})
	if err != nil {
		t.Fatal(err)
	}
	if plain[0].Err != nil || mapped[0].Err != nil {
		t.Fatalf("errors: %v %v", plain[0].Err, mapped[0].Err)
	}
	if plain[0].Record.Hash() != mapped[0].Record.Hash() {
		t.Errorf("hashes differ: %+v and %+v", plain[0].Record, mapped[0].Record)
	}
	if mapped[0].Display.Component != "BASE (REG)" {
		t.Errorf("echo %q", mapped[0].Display.Component)
	}
}

func TestUnknownComponentKeep(t *testing.T) {
	rows, err := readAll(t, strings.NewReader("employee_ref,pay_period,component,amount,currency\nE1,2026-03,xmas,10.00,USD\n"),
		Settings{Components: map[string]string{"REG": "BASE"}, UnknownComponent: UnknownComponentKeep})
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Err != nil || rows[0].Record.Component != "XMAS" || rows[0].Display.Component != "XMAS" {
		t.Fatalf("row = %+v, want XMAS kept", rows[0])
	}
}
