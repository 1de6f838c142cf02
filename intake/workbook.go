package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/workbook"
)

// IsWorkbook tells whether a file is read as an Excel workbook: its
// (decrypted) name ends in .xlsx, whichever door brought it.
func IsWorkbook(fileName string) bool {
	return strings.EqualFold(path.Ext(records.PlainName(fileName)), ".xlsx")
}

// openRows opens a file's rows for normalize: a workbook's sheet, or CSV.
// The sheet is closed with the rows (closing, closeRows).
func openRows(fileName string, body io.Reader, s normalize.Settings) (*normalize.Reader, io.Closer, error) {
	if !IsWorkbook(fileName) {
		r, err := normalize.NewReader(body, s)
		return r, nil, err
	}
	sh, err := workbook.Open(body, workbook.Options{DecimalComma: s.DecimalComma, DateFormat: s.DateFormat})
	if err != nil {
		return nil, nil, err
	}
	r, err := normalize.NewRowsReader(sh, s)
	if err != nil {
		return nil, nil, errors.Join(err, sh.Close())
	}
	return r, sh, nil
}

// closing is a file's rows that close its workbook sheet when they close.
type closing struct {
	*rowSource
	sheet io.Closer
}

func (c closing) Close() error { return errors.Join(c.rowSource.Close(), c.sheet.Close()) }

// withSheet gives rows that also close sheet, when there is one.
func withSheet(rows *rowSource, sheet io.Closer) apply.RowSource {
	if sheet == nil {
		return rows
	}
	return closing{rows, sheet}
}

// WriteResultWorkbook writes envelope id's result file as a workbook
// (workbook.ResultWorkbook, NAME.result.xlsx), for a partner whose profile
// asks for results as xlsx. The workbook is made from the stored result
// file alone, so a replay, which serves the first result, gets the same
// bytes. A sealed result (OpenPGP) has no workbook: it is encrypted, and
// a workbook made from its plaintext would be sent in the clear.
func (in *Intake) WriteResultWorkbook(ctx context.Context, id int64, w io.Writer) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(in.Store.WriteResult(ctx, id, pw)) }()
	err := workbook.ResultWorkbook(w, pr)
	pr.CloseWithError(errors.New("the workbook is written"))
	if err != nil {
		return fmt.Errorf("result of envelope %d as a workbook: %w", id, err)
	}
	return nil
}
