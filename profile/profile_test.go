package profile_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/profile"
	"github.com/payintake/payintake/records"
)

const hrProfile = `# Acme HR's payroll export
columns:
  employee_ref: ["Emp No", "Employee Number"]
  pay_period: "Period"
  component: "Earning Code"
  amount: "Gross Pay"
  currency: "Curr"
  pay_date: "Pay Date"
components:
  REG: BASE
  ot: overtime
  BON: BONUS
unknown_component: reject
sheet: "Payroll"
results: csv-excel
delimiter: ";"
decimal_comma: true
date_format: DD.MM.YYYY
`

func TestParseHRProfile(t *testing.T) {
	p, err := profile.Parse([]byte(hrProfile))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Columns["employee_ref"], "|"); got != "Emp No|Employee Number" {
		t.Errorf("employee_ref headers = %q", got)
	}
	if p.Components["OT"] != "OVERTIME" || p.Components["REG"] != "BASE" || len(p.Components) != 3 {
		t.Errorf("components = %v, want codes and components upper-cased", p.Components)
	}
	if p.UnknownComponent != normalize.UnknownComponentReject || p.Sheet != "Payroll" || p.Results != normalize.ResultsCSVExcel {
		t.Errorf("unknown_component %q sheet %q results %q", p.UnknownComponent, p.Sheet, p.Results)
	}
	want := []profile.Setting{{"delimiter", ";", 16}, {"decimal_comma", "true", 17}, {"date_format", "DD.MM.YYYY", 18}}
	if len(p.Settings) != len(want) {
		t.Fatalf("settings = %v, want %v", p.Settings, want)
	}
	for i := range want {
		if p.Settings[i] != want[i] {
			t.Errorf("setting %d = %v, want %v", i, p.Settings[i], want[i])
		}
	}
}

func TestParseDefaults(t *testing.T) {
	p, err := profile.Parse([]byte("components:\n  REG: BASE\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.UnknownComponent != normalize.UnknownComponentReject || p.Results != normalize.ResultsCSV {
		t.Errorf("defaults: unknown_component %q results %q, want reject and csv", p.UnknownComponent, p.Results)
	}
}

// TestParseRefusals: each refusal names the line of the YAML where the
// mistake is, and what to do.
func TestParseRefusals(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"unknown key", "columns:\n  amount: Gross\ncolour: blue\n", 3, `unknown key "colour"`},
		{"unknown field", "columns:\n  employee_ref: Emp No\n  salary: Gross Pay\n", 3, `"salary" is not a payintake field`},
		{"two fields one header", "columns:\n  amount: Gross Pay\n  rate: gross_pay\n", 3, `header "gross_pay" is mapped to both amount (line 2) and rate`},
		{"two fields one header in lists", "columns:\n  employee_ref: [Emp No, ID]\n  pay_period:\n    - Period\n    - id\n", 5, `mapped to both employee_ref (line 2) and pay_period`},
		{"empty component", "components:\n  REG: BASE\n  OT:\n", 3, "code OT is mapped to an empty component"},
		{"blank component", "components:\n  REG: \"  \"\n", 2, "code REG is mapped to an empty component"},
		{"code twice", "components:\n  REG: BASE\n  reg: BONUS\n", 3, "code REG is mapped twice (first on line 2"},
		{"key twice", "sheet: A\nsheet: B\n", 2, "sheet is given twice (first on line 1)"},
		{"field twice", "columns:\n  amount: A\n  amount: B\n", 3, "amount is mapped twice"},
		{"bad policy", "components:\n  REG: BASE\nunknown_component: drop\n", 3, `unknown_component "drop": use reject, hold or keep`},
		{"bad results", "results: pdf\n", 1, `results "pdf": use csv, csv-excel or xlsx`},
		{"policy without codes", "unknown_component: keep\n", 1, "components: maps no code"},
		{"empty header", "columns:\n  amount: \"\"\n", 2, "empty header"},
		{"not a mapping", "- a\n- b\n", 1, "a profile is a mapping"},
		{"setting as list", "delimiter: [';']\n", 1, "delimiter takes one value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := profile.Parse([]byte(c.yaml))
			var pe *profile.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %v, want a *profile.Error", err)
			}
			if pe.Line != c.line || !strings.Contains(pe.Error(), c.want) {
				t.Errorf("Parse = %q (line %d), want line %d and %q", pe.Error(), pe.Line, c.line, c.want)
			}
			if !strings.Contains(pe.Error(), "profile line ") {
				t.Errorf("%q does not name the line", pe.Error())
			}
		})
	}
}

func TestParseHold(t *testing.T) {
	p, err := profile.Parse([]byte("components:\n  REG: BASE\nunknown_component: hold\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.UnknownComponent != normalize.UnknownComponentHold {
		t.Errorf("unknown_component = %q, want hold", p.UnknownComponent)
	}
}

// TestApplyHoldsAnUnmappedCode: under unknown_component: hold, a row whose
// code the profile lacks is read whole, with the code as its component, and
// given as held (not rejected), its message naming the code and the
// profile; a row with another error is rejected for it, not held.
func TestApplyHoldsAnUnmappedCode(t *testing.T) {
	rd := readWith(t, "components:\n  REG: BASE\nunknown_component: hold\n", records.Partner{ID: "acme"}, 4,
		"employee_ref,pay_period,component,amount,currency\n"+
			"E1,2026-03,xmas,50.00,EUR\n"+
			"E1,2026-03,XMAS,abc,EUR\n")
	row, err := rd.Next()
	if err != nil || row.Err != nil {
		t.Fatalf("row 1: %v %v", err, row.Err)
	}
	if row.Held == nil || !errors.Is(row.Held, normalize.CodeUnknownComponent) || row.Held.Field != normalize.FieldComponent {
		t.Fatalf("row 1 held = %v, want unknown_component on component", row.Held)
	}
	for _, want := range []string{`"XMAS"`, "partner profile acme (version 4)", "held", "do not resend it"} {
		if !strings.Contains(row.Held.Message, want) {
			t.Errorf("row 1 message %q lacks %q", row.Held.Message, want)
		}
	}
	if r := row.Record; r.Component != "XMAS" || r.AmountString() != "50.00" || row.Display.Component != "XMAS" {
		t.Errorf("row 1 = %+v echoing %q, want the code as its component, echoed alone", r, row.Display.Component)
	}
	row, err = rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if row.Held != nil || row.Err == nil || !errors.Is(row.Err, normalize.CodeInvalidAmount) {
		t.Errorf("row 2 = held %v err %v, want rejected for its amount", row.Held, row.Err)
	}
}

// TestDecidedCodesAreRead: a code reviewers gave a component is read as it
// (unless the profile maps it: the profile's mapping comes first).
func TestDecidedCodesAreRead(t *testing.T) {
	s := intake.FileSettings(records.Partner{ID: "acme", Profile: &records.PartnerProfile{Version: 1,
		Components: map[string]string{"REG": "BASE"}, UnknownComponent: normalize.UnknownComponentHold,
		Decided: map[string]string{"XMAS": "BONUS", "REG": "OVERTIME"}}})
	rd, err := normalize.NewReader(strings.NewReader("employee_ref,pay_period,component,amount,currency\nE1,2026-03,XMAS,1.00,EUR\nE1,2026-03,REG,1.00,EUR\n"), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BONUS (XMAS)", "BASE (REG)"} {
		row, err := rd.Next()
		if err != nil || row.Err != nil || row.Held != nil {
			t.Fatalf("%s: %v %v %v", want, err, row.Err, row.Held)
		}
		if row.Display.Component != want {
			t.Errorf("component echoed %q, want %q", row.Display.Component, want)
		}
	}
}

func TestParseEmpty(t *testing.T) {
	_, err := profile.Parse(nil)
	var pe *profile.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("Parse(empty) = %v", err)
	}
	if errors.Is(err, io.EOF) {
		t.Errorf("the refusal leaks io.EOF: %v", err)
	}
}

// TestApplyReadsTheExport reads an HR export through the profile's mapping.
// readWith reads file as partner p's upload read with the profile yaml as
// its version.
func readWith(t *testing.T, yaml string, p records.Partner, version int, file string) *normalize.Reader {
	t.Helper()
	pr, err := profile.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	p.Profile = &records.PartnerProfile{Version: version, Columns: pr.Columns, Components: pr.Components, UnknownComponent: pr.UnknownComponent}
	rd, err := normalize.NewReader(strings.NewReader(file), intake.FileSettings(p))
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func TestApplyReadsTheExport(t *testing.T) {
	rd := readWith(t, hrProfile, records.Partner{ID: "acme", Delimiter: ";", DecimalComma: true, DateFormat: "DD.MM.YYYY"}, 1,
		"Employee Number;Name;Period;Earning Code;Gross Pay;Curr;Pay Date\n"+
			"00042;Zoë Brandt;2026-03;REG;1.234,50;EUR;31.03.2026\n"+
			"00042;Zoë Brandt;2026-03;XMAS;50,00;EUR;31.03.2026\n")
	row, err := rd.Next()
	if err != nil || row.Err != nil {
		t.Fatalf("row 1: %v %v", err, row.Err)
	}
	if r := row.Record; r.EmployeeRef != "00042" || r.Component != "BASE" || r.AmountString() != "1234.50" || r.PayDate != "2026-03-31" {
		t.Errorf("row 1 = %+v", r)
	}
	if row.Display.Component != "BASE (REG)" {
		t.Errorf("row 1 echoes component %q, want the component and the partner's code", row.Display.Component)
	}
	row, err = rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if row.Err == nil || !errors.Is(row.Err, normalize.CodeUnknownComponent) {
		t.Fatalf("row 2 err = %v, want unknown_component", row.Err)
	}
	if !strings.Contains(row.Err.Message, `"XMAS"`) || !strings.Contains(row.Err.Message, "partner profile acme (version 1)") {
		t.Errorf("row 2 message %q names neither the code nor the profile", row.Err.Message)
	}
}
