package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/payintake/payintake/workbook"
)

// payDate is every generated row's pay date.
var payDate = time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)

// WriteWorkbook writes the file's clean form (File.Clean: the same rows
// and values) as an .xlsx workbook, as a spreadsheet holds a payroll
// export: one sheet, the clean header, identifiers and codes as text,
// amounts, hours and rates as numbers, the pay date as a date serial with
// a date format. Written with excelize's StreamWriter (its temporary files
// in tmpDir) and saved as result workbooks are (workbook.Save), so its
// memory is gone before a measured step starts.
func (b File) WriteWorkbook(w io.Writer, tmpDir string) (int64, error) {
	f := excelize.NewFile(excelize.Options{TmpDir: tmpDir})
	defer f.Close()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		return 0, fmt.Errorf("bench workbook: %w", err)
	}
	date, err := f.NewStyle(&excelize.Style{NumFmt: 14})
	if err != nil {
		return 0, fmt.Errorf("bench workbook: %w", err)
	}
	var head []any
	for _, h := range strings.Split(cleanHeader, ",") {
		head = append(head, h)
	}
	if err := sw.SetRow("A1", head); err != nil {
		return 0, fmt.Errorf("bench workbook: %w", err)
	}
	cells := make([]any, 8)
	n := 2
	err = b.each(func(g genRow, _ int) error {
		cells[0] = fmt.Sprintf("E%08d", g.employee)
		cells[1] = "2026-03"
		cells[2] = g.component
		cells[3] = float64(g.cents) / 100
		cells[4] = "USD"
		cells[5] = nil
		if g.hours != "" {
			h, err := strconv.ParseFloat(g.hours, 64)
			if err != nil {
				return err
			}
			cells[5] = h
		}
		cells[6] = nil
		if g.rateCents != 0 {
			cells[6] = float64(g.rateCents) / 100
		}
		cells[7] = excelize.Cell{StyleID: date, Value: payDate}
		cell, err := excelize.CoordinatesToCellName(1, n)
		if err != nil {
			return err
		}
		n++
		return sw.SetRow(cell, cells)
	})
	if err != nil {
		return 0, fmt.Errorf("bench workbook: %w", err)
	}
	if err := sw.Flush(); err != nil {
		return 0, fmt.Errorf("bench workbook: %w", err)
	}
	cw := &countWriter{w: w}
	err = workbook.Save(f, cw)
	return cw.n, err
}
