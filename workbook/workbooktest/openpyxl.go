// Package workbooktest makes workbooks for tests with a real spreadsheet
// writer: Debian's python3-openpyxl (scripts/install-deps.sh test).
package workbooktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Python3 is Debian's, with python3-openpyxl.
const Python3 = "/usr/bin/python3"

// prelude imports openpyxl and defines cache(path, sheet, ref, value),
// which stores a formula's cached value as Excel does when it saves
// (openpyxl writes formulas without one).
const prelude = `
import datetime, os, re, sys, zipfile
from openpyxl import Workbook, load_workbook
OUT = os.environ["OUT"]
def cache(path, sheet, ref, value):
    z = zipfile.ZipFile(path)
    parts = {n: z.read(n) for n in z.namelist()}
    z.close()
    rid = re.search(r'<sheet [^>]*name="%s"[^>]*r:id="([^"]+)"' % sheet, parts["xl/workbook.xml"].decode()).group(1)
    target = re.search(r'<Relationship [^>]*Id="%s"[^>]*Target="([^"]+)"|<Relationship [^>]*Target="([^"]+)"[^>]*Id="%s"' % (rid, rid), parts["xl/_rels/workbook.xml.rels"].decode())
    sheet_xml = "xl/" + (target.group(1) or target.group(2)).lstrip("/").replace("xl/", "", 1)
    xml = parts[sheet_xml].decode()
    cell = re.search(r'<c r="%s"[^>]*>.*?</c>' % ref, xml).group(0)
    parts[sheet_xml] = xml.replace(cell, re.sub(r'<v\s*/>|<v></v>', '<v>%s</v>' % value, cell)).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in parts.items():
            z.writestr(n, b)
`

// Openpyxl runs a Python script after prelude, with env added to the
// environment; the script saves a workbook to the path in OUT, whose bytes
// Openpyxl returns.
func Openpyxl(t testing.TB, script string, env ...string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "book.xlsx")
	Run(t, script, append(env, "OUT="+out)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Run runs a Python script after prelude with env added to the
// environment (OUT must be among it) and returns what it prints.
func Run(t testing.TB, script string, env ...string) string {
	t.Helper()
	cmd := exec.Command(Python3, "-c", prelude+script)
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("python3 with openpyxl (Debian's python3-openpyxl, scripts/install-deps.sh test): %v\n%s%s", err, b, stderr)
	}
	return string(b)
}

// Payroll is an HR export as a spreadsheet writer makes it: a notes
// sheet in front, identifiers as text with leading zeros, amounts as
// numbers (one with a currency format), pay dates as date serials (two
// date formats), and a formula whose value Excel cached. With
// PAYROLL_FIRST=1 in the environment, the payroll sheet comes first.
const Payroll = `
wb = Workbook()
notes = wb.active
notes.title = "Notes"
notes["A1"] = "November payroll, exported from the HR system"
notes["A2"] = "Amounts in the currency of each line"
ws = wb.create_sheet("Payroll")
ws.append(["Employee Ref", "Pay Period", "Component", "Amount", "Currency", "Pay Date"])
ws.append(["00123", "2026-11", "BASE", 4000, "USD", datetime.date(2026, 11, 30)])
ws.append(["00124", "2026-11", "BONUS", 0.07, "USD", datetime.date(2026, 11, 30)])
ws.append([])
ws.append(["00125", "2026-11", "BASE", 100000.1, "EUR", datetime.date(2026, 12, 1)])
ws.append(["00126", "2026-11", "OVERTIME", "=D2/8", "USD", datetime.date(2026, 11, 30)])
ws["D6"].number_format = '"$"#,##0.00'
ws["F6"].number_format = "dd/mm/yyyy"
if os.environ.get("PAYROLL_FIRST"):
    wb.move_sheet("Payroll", offset=-1)
wb.save(OUT)
cache(OUT, "Payroll", "D6", "500")
`

// PayrollCSV is Payroll's sheet as a partner would export it to CSV: the
// same payroll, written differently, on the same line numbers.
const PayrollCSV = "Employee Ref,Pay Period,Component,Amount,Currency,Pay Date\n" +
	"00123,2026-11,BASE,4000.00,USD,2026-11-30\n" +
	"00124,2026-11,BONUS,0.07,USD,2026-11-30\n" +
	",,,,,\n" +
	"00125,2026-11,BASE,100000.10,EUR,2026-12-01\n" +
	"00126,2026-11,OVERTIME,$500.00,USD,2026-11-30\n"
