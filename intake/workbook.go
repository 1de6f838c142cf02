package intake

import (
	"errors"
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

// openRows opens a file of partner p for normalize, read with its settings
// and profile: a workbook's sheet (the one the profile names, else the
// first), or CSV. The sheet is closed with the rows (closing, closeRows).
func openRows(fileName string, body io.Reader, p records.Partner) (*normalize.Reader, io.Closer, error) {
	s := FileSettings(p)
	if !IsWorkbook(fileName) {
		r, err := normalize.NewReader(body, s)
		return r, nil, err
	}
	sh, err := workbook.Open(body, workbook.Options{Sheet: sheetOf(p), DecimalComma: s.DecimalComma, DateFormat: s.DateFormat})
	if err != nil {
		return nil, nil, err
	}
	r, err := normalize.NewRowsReader(sh, s)
	if err != nil {
		return nil, nil, errors.Join(err, sh.Close())
	}
	return r, sh, nil
}

// sheetOf is the sheet p's profile names ("": the first).
func sheetOf(p records.Partner) string {
	if p.Profile == nil {
		return ""
	}
	return p.Profile.Sheet
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

// WorkbookContentType is the media type of an Excel workbook (.xlsx), a
// result served as one.
const WorkbookContentType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
