package apply_test

import (
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// In production the engine refuses, for a partner whose results are
// workbooks, a file with more data rows than a sheet holds below its
// header: Excel's 1,048,576 rows (excelize.TotalRows) less one. Tests
// lower the limit (Options.WorkbookRows) to try a file over it
// (intake's TestWorkbookResultRowLimit).
func TestWorkbookRowsAreASheetsBelowItsHeader(t *testing.T) {
	st := pgtest.Store(t)
	if got := apply.WorkbookRows(apply.New(st, apply.Options{})); got != excelize.TotalRows-1 {
		t.Fatalf("the engine's limit: %d rows, want excelize.TotalRows-1 = 1,048,575", got)
	}
	if got := apply.WorkbookRows(apply.New(st, apply.Options{WorkbookRows: 3})); got != 3 {
		t.Fatalf("the engine's limit lowered to 3: %d", got)
	}
}
