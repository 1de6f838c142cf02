package workbook

import (
	"archive/zip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"

	"github.com/payintake/payintake/normalize"
)

// resultSheet is the one sheet of a result workbook.
const resultSheet = "Results"

// Fills of the rows a partner must act on: Excel's own "bad" (light red)
// and "neutral" (light yellow) cell colours.
const (
	rejectedFill = "FFC7CE"
	heldFill     = "FFEB9C"
)

// MaxResultRows is the most result lines a result workbook holds: a
// sheet's rows (excelize.TotalRows, Excel's limit) below its header. The
// engine refuses a larger file for a partner whose results are workbooks
// before it applies it (apply.Options.WorkbookRows).
const MaxResultRows = excelize.TotalRows - 1

// ResultWorkbook writes a result file (its CSV bytes, as normalize's
// ResultHeader and AppendResultLine lay them out) as a workbook a
// partner's people can open: one sheet, the header row frozen, rejected
// rows filled light red and held rows light yellow, line and row as
// whole numbers, the amount as a number shown with its currency's
// decimals, and every identifier (employee_ref, pay_period, component)
// as text, so leading zeros stay. An amount whose decimal a double cannot
// hold as the same decimal text (more than 15 significant digits) stays
// text rather than be rounded, and so does one with more decimals than its
// currency has. The same CSV always gives the same bytes:
// nothing in the workbook depends on the time.
//
// Memory stays flat whatever the number of rows: excelize's StreamWriter
// keeps the sheet's XML in memory up to 16 MiB (excelize.StreamChunkSize)
// and then in a temporary file in tmpDir ("": os.TempDir()), removed when
// the workbook is written; the archive is compressed straight to w
// (Save), never held whole in memory.
func ResultWorkbook(w io.Writer, resultCSV io.Reader, tmpDir string) error {
	cr := csv.NewReader(resultCSV)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("workbook: read the result file's header: %w", err)
	}
	if strings.Join(header, ",")+"\n" != normalize.ResultHeader {
		return fmt.Errorf("workbook: the result file's header is %q, not %q", header, strings.TrimSpace(normalize.ResultHeader))
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	f := excelize.NewFile(excelize.Options{TmpDir: tmpDir})
	defer f.Close()
	if err := f.SetSheetName("Sheet1", resultSheet); err != nil {
		return fmt.Errorf("workbook: %w", err)
	}
	st, err := newResultStyles(f)
	if err != nil {
		return err
	}
	sw, err := f.NewStreamWriter(resultSheet)
	if err != nil {
		return fmt.Errorf("workbook: %w", err)
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return fmt.Errorf("workbook: freeze the header: %w", err)
	}
	for i, width := range []float64{7, 6, 10, 14, 11, 14, 14, 9, 20, 12, 60} {
		if err := sw.SetColWidth(i+1, i+1, width); err != nil {
			return fmt.Errorf("workbook: %w", err)
		}
	}
	head := make([]any, len(header))
	for i, h := range header {
		head[i] = excelize.Cell{StyleID: st.header, Value: h}
	}
	if err := sw.SetRow("A1", head); err != nil {
		return fmt.Errorf("workbook: %w", err)
	}
	row := make([]any, len(header))
	for n := 2; ; n++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("workbook: read the result file: %w", err)
		}
		if n-1 > MaxResultRows {
			return fmt.Errorf("workbook: the result file has more than %d rows, the most a sheet holds below its header", MaxResultRows)
		}
		kind := st.plain
		switch rec[col["outcome"]] {
		case "rejected":
			kind = st.rejected
		case "held":
			kind = st.held
		}
		for i, v := range rec {
			row[i] = excelize.Cell{StyleID: kind.text, Value: v}
			switch header[i] {
			case "line", "row":
				if n, err := strconv.Atoi(v); err == nil {
					row[i] = excelize.Cell{StyleID: kind.text, Value: n}
				}
			case normalize.FieldAmount:
				if num, style, ok := kind.money(v, rec[col[normalize.FieldCurrency]]); ok {
					row[i] = excelize.Cell{StyleID: style, Value: num}
				}
			}
		}
		cell, _ := excelize.CoordinatesToCellName(1, n)
		if err := sw.SetRow(cell, row[:len(rec)]); err != nil {
			return fmt.Errorf("workbook: %w", err)
		}
	}
	if err := sw.Flush(); err != nil {
		return fmt.Errorf("workbook: %w", err)
	}
	return Save(f, w)
}

// Save writes f's archive to w as it is compressed. excelize's
// File.WriteTo builds the whole archive in a bytes.Buffer before writing a
// byte of it (File.WriteToBuffer): tens of MB for a million rows. Its zip
// writer hook is given that buffer; the one set here writes to w instead,
// so the buffer stays empty. (WriteToBuffer's one later step on the buffer
// marks parts over 4 GiB as ZIP64 in their local headers; archive/zip's
// central directory records them either way, and a sheet, at most
// 1,048,576 rows, of result or payroll lines never reaches that size.)
func Save(f *excelize.File, w io.Writer) error {
	f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return zip.NewWriter(w) })
	n, err := f.WriteTo(io.Discard)
	if err != nil {
		return fmt.Errorf("workbook: write the workbook: %w", err)
	}
	if n != 0 {
		return fmt.Errorf("workbook: write the workbook: excelize wrote %d bytes around its zip writer", n)
	}
	return nil
}

// resultStyles are the cell styles of a result workbook: the header's, and
// for each kind of row (plain, rejected, held) text and money at each
// currency scale.
type resultStyles struct {
	header                int
	plain, rejected, held rowStyles
}

type rowStyles struct {
	text   int
	amount [4]int // by the currency's decimals: 0 to 3
}

func newResultStyles(f *excelize.File) (resultStyles, error) {
	var st resultStyles
	var err error
	if st.header, err = f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}, NumFmt: 49}); err != nil {
		return st, fmt.Errorf("workbook: %w", err)
	}
	for _, r := range []struct {
		into *rowStyles
		fill string
	}{{&st.plain, ""}, {&st.rejected, rejectedFill}, {&st.held, heldFill}} {
		base := excelize.Style{NumFmt: 49} // text: "@"
		if r.fill != "" {
			base.Fill = excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{r.fill}}
		}
		if r.into.text, err = f.NewStyle(&base); err != nil {
			return st, fmt.Errorf("workbook: %w", err)
		}
		for scale := range r.into.amount {
			code := "#,##0"
			if scale > 0 {
				code += "." + strings.Repeat("0", scale)
			}
			money := base
			money.NumFmt = 0
			money.CustomNumFmt = &code
			if r.into.amount[scale], err = f.NewStyle(&money); err != nil {
				return st, fmt.Errorf("workbook: %w", err)
			}
		}
	}
	return st, nil
}

// money is an amount as the number Excel will hold, with the style that
// shows its currency's decimals; false when it stays text: not a number
// (a rejected row's amount as the partner sent it), an unknown currency,
// more decimals than the currency has, or a decimal a double would not
// give back as the same text.
func (r rowStyles) money(v, currency string) (float64, int, bool) {
	scale, ok := normalize.CurrencyScale(currency)
	if !ok || scale >= len(r.amount) {
		return 0, 0, false
	}
	d, err := decimal.NewFromString(v)
	// More decimals than the currency has (a rejected row's amount) would
	// be shown rounded: it stays text.
	if err != nil || strings.ContainsAny(v, "eE") || -d.Exponent() > int32(scale) {
		return 0, 0, false
	}
	x, _ := d.Float64()
	if strconv.FormatFloat(x, 'f', -1, 64) != d.String() {
		return 0, 0, false
	}
	return x, r.amount[scale], true
}
