package workbook

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/workbook/workbooktest"
)

const resultCSV = `line,row,outcome,employee_ref,pay_period,component,amount,currency,code,field,message
2,1,created,00123,2026-11,BASE,4000.00,USD,,,
3,2,rejected,00124,2026-11,BONUS,12.345,USD,too_many_decimals,amount,"amount ""12.345"" has more decimals than USD allows"
4,3,held,00125,2026-11,BASE,100000.10,EUR,period_locked,,the pay period is closed
5,4,unchanged,007,2026-11,BASE,5000,JPY,,,
6,5,updated,E9,2026-11,BASE,1.234,BHD,,,
`

// TestResultWorkbookAsOpenpyxlReadsIt converts a result file and reads the
// workbook back with openpyxl: the header frozen, rejected and held rows
// filled, numbers where numbers are, identifiers as text; and the same
// CSV gives the same bytes.
func TestResultWorkbookAsOpenpyxlReadsIt(t *testing.T) {
	var a, b bytes.Buffer
	if err := ResultWorkbook(&a, strings.NewReader(resultCSV), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := ResultWorkbook(&b, strings.NewReader(resultCSV), ""); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same result file gave two different workbooks")
	}
	path := filepath.Join(t.TempDir(), "pay.result.xlsx")
	if err := os.WriteFile(path, a.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := workbooktest.Run(t, `
import json
wb = load_workbook(sys.argv[1] if len(sys.argv) > 1 else os.environ["BOOK"])
ws = wb.active
core = zipfile.ZipFile(os.environ["BOOK"]).read("docProps/core.xml").decode()
rows = []
for row in ws.iter_rows():
    rows.append([[c.value, c.data_type, c.number_format, c.fill.fgColor.rgb if c.fill.fill_type else None] for c in row])
print(json.dumps({"sheets": wb.sheetnames, "freeze": ws.freeze_panes, "rows": rows, "created": str(wb.properties.created)}))
`, "BOOK="+path, "OUT="+path)
	var got struct {
		Sheets  []string
		Freeze  string
		Rows    [][][4]any
		Created string
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("openpyxl's answer %q: %v", out, err)
	}
	if len(got.Sheets) != 1 || got.Freeze != "A2" || len(got.Rows) != 6 {
		t.Fatalf("sheets %v, frozen at %q, %d rows; want one sheet, the header frozen (A2), 6 rows", got.Sheets, got.Freeze, len(got.Rows))
	}
	cell := func(row, col int) [4]any { return got.Rows[row][col] }
	for _, tc := range []struct {
		row, col int
		want     [3]any // value, openpyxl's data type, number format
	}{
		{0, 3, [3]any{"employee_ref", "s", "@"}},
		{1, 0, [3]any{2.0, "n", "@"}},
		{1, 3, [3]any{"00123", "s", "@"}},
		{1, 6, [3]any{4000.0, "n", "#,##0.00"}},
		{2, 6, [3]any{"12.345", "s", "@"}}, // rejected: as the partner sent it
		{3, 6, [3]any{100000.1, "n", "#,##0.00"}},
		{4, 3, [3]any{"007", "s", "@"}},
		{4, 6, [3]any{5000.0, "n", "#,##0"}},
		{5, 6, [3]any{1.234, "n", "#,##0.000"}},
	} {
		c := cell(tc.row, tc.col)
		if [3]any{c[0], c[1], c[2]} != tc.want {
			t.Errorf("row %d column %d: %v, want %v", tc.row+1, tc.col+1, c[:3], tc.want)
		}
	}
	for row, fill := range map[int]any{1: nil, 2: "FF" + rejectedFill, 3: "FF" + heldFill, 4: nil} {
		for col := range got.Rows[row] {
			if f := cell(row, col)[3]; f != fill {
				t.Errorf("row %d column %d filled %v, want %v", row+1, col+1, f, fill)
			}
		}
	}
	if strings.HasPrefix(got.Created, "20") && !strings.HasPrefix(got.Created, "2006-09-16") {
		t.Errorf("created %s: a result workbook must not carry the time it was made (its bytes would differ on a replay)", got.Created)
	}
}
