package workbook

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/payintake/payintake/normalize"
)

// Options say how a sheet is read.
type Options struct {
	// Sheet is the name of the sheet to read (case ignored, as Excel
	// does); "" reads the first sheet.
	Sheet string
	// DecimalComma writes numbers with a decimal comma ("1234,5"), for a
	// partner whose text cells use one: normalize then reads both alike.
	DecimalComma bool
	// DateFormat writes dates in the partner's date format (normalize's
	// tokens YYYY, MM and DD with any separators, "DD.MM.YYYY"), for a
	// partner whose text cells use it: ISO would be misread by a format
	// of the same shape ("YYYY-DD-MM"). "" writes YYYY-MM-DD.
	DateFormat string
	// TempDir is where an upload that cannot be read at random (a
	// decrypted stream) is spooled: a workbook is a zip archive, whose
	// directory is at its end. "" is os.TempDir.
	TempDir string
}

// maxColumns is the widest sheet Excel makes (XFD).
const maxColumns = 16384

// Sheet streams the rows of one sheet of a workbook. It implements
// normalize.Rows. Close it.
type Sheet struct {
	Name string // the sheet's name as the workbook gives it

	opt      Options
	spool    *os.File // the upload copied to disk, when it was a stream
	part     io.ReadCloser
	sc       *scanner
	sst      []string
	styles   []format
	date1904 bool

	cells     []string
	line      int // the last row's number
	headerRow int // the header's row number, once read
	err       error
}

// Open reads the package around one sheet of a workbook (its sheet list,
// shared strings and styles) and prepares to stream the sheet's rows. r is
// read at random when it is an io.ReaderAt and io.Seeker (a file, a
// bytes.Reader), else copied to a temporary file first. A workbook that
// cannot be read, or has no such sheet, is a *normalize.ParseError.
func Open(r io.Reader, opt Options) (*Sheet, error) {
	s := &Sheet{opt: opt}
	ra, size, err := s.readerAt(r)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.open(ra, size); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sheet) readerAt(r io.Reader) (io.ReaderAt, int64, error) {
	if rs, ok := r.(interface {
		io.ReaderAt
		io.Seeker
	}); ok {
		size, err := rs.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, 0, fmt.Errorf("workbook: size of the upload: %w", err)
		}
		return rs, size, nil
	}
	f, err := os.CreateTemp(s.opt.TempDir, "payintake-workbook-*.xlsx")
	if err != nil {
		return nil, 0, fmt.Errorf("workbook: spool the upload: %w", err)
	}
	s.spool = f
	size, err := io.Copy(f, r)
	if err != nil {
		return nil, 0, fmt.Errorf("workbook: spool the upload: %w", err)
	}
	return f, size, nil
}

// oleMagic starts an OLE compound file: a legacy .xls, or an .xlsx
// encrypted with a password.
var oleMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}

func refuse(code normalize.Code, line, col int, msg string, cause error) *normalize.ParseError {
	err := error(code)
	if cause != nil {
		err = normalize.Cause(code, cause)
	}
	return &normalize.ParseError{StartLine: line, Line: line, Column: col, Err: err, Message: msg}
}

func (s *Sheet) open(ra io.ReaderAt, size int64) error {
	head := make([]byte, len(oleMagic))
	if n, _ := ra.ReadAt(head, 0); n == len(head) && bytes.Equal(head, oleMagic) {
		return refuse(normalize.CodeInvalidWorkbook, 0, 0,
			"the file is an encrypted workbook or an old Excel 97–2003 (.xls) file, which cannot be read; save it in Excel as an Excel Workbook (.xlsx) without a password and send it again", nil)
	}
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return refuse(normalize.CodeInvalidWorkbook, 0, 0,
			"the file is not an Excel workbook (.xlsx: a zip archive) or is damaged; save it in Excel as an Excel Workbook (.xlsx), or export CSV, and send it again", err)
	}
	bad := func(err error) error {
		return refuse(normalize.CodeInvalidWorkbook, 0, 0, fmt.Sprintf(
			"the workbook cannot be read (%v); open it in Excel, save it as an Excel Workbook (.xlsx) and send it again", err), err)
	}
	info, err := readWorkbook(zr)
	if err != nil {
		return bad(err)
	}
	sh, err := pickSheet(info.sheets, s.opt.Sheet)
	if err != nil {
		return err
	}
	s.Name, s.date1904 = sh.name, info.date1904
	wbPart := info.part
	if s.styles, err = readStyles(zr, wbPart); err != nil {
		return bad(err)
	}
	if s.sst, err = readSharedStrings(zr, wbPart); err != nil {
		return bad(err)
	}
	if s.part, err = openPart(zr, sh.part); err != nil {
		return bad(err)
	}
	if s.part == nil {
		return bad(fmt.Errorf("sheet %q has no part %s", sh.name, sh.part))
	}
	s.sc = newScanner(s.part)
	return nil
}

func pickSheet(sheets []sheetEntry, name string) (sheetEntry, error) {
	if len(sheets) == 0 {
		return sheetEntry{}, refuse(normalize.CodeMissingSheet, 0, 0, "the workbook has no worksheet; send a workbook with the payroll on a worksheet", nil)
	}
	if strings.TrimSpace(name) == "" {
		return sheets[0], nil
	}
	names := make([]string, len(sheets))
	for i, sh := range sheets {
		if strings.EqualFold(strings.TrimSpace(sh.name), strings.TrimSpace(name)) {
			return sh, nil
		}
		names[i] = strconv.Quote(sh.name)
	}
	return sheetEntry{}, refuse(normalize.CodeMissingSheet, 0, 0, fmt.Sprintf(
		"the workbook has no sheet named %q (its sheets: %s); name the payroll sheet %q, or ask for the partner's profile to name the sheet it has", name, strings.Join(names, ", "), name), nil)
}

// Close releases the sheet's stream and the spooled copy of the upload.
func (s *Sheet) Close() error {
	var errs []error
	if s.part != nil {
		errs = append(errs, s.part.Close())
		s.part = nil
	}
	if s.spool != nil {
		errs = append(errs, s.spool.Close(), os.Remove(s.spool.Name()))
		s.spool = nil
	}
	return errors.Join(errs...)
}

// cell is a <c> element as read.
type cell struct {
	col        int
	typ        string // the t attribute
	style      int
	v, inline  string
	hasV, hasF bool
}

// Row returns the next row's cells (reused by the next call) and its row
// number, io.EOF after the last row; a *normalize.ParseError refuses the
// file, and every later call returns it again.
func (s *Sheet) Row() ([]string, int, error) {
	if s.err != nil {
		return nil, 0, s.err
	}
	cells, line, err := s.row()
	if err != nil {
		s.err = err
		return nil, 0, err
	}
	return cells, line, nil
}

func (s *Sheet) row() ([]string, int, error) {
	sc := s.sc
	for {
		err := sc.next()
		if err == io.EOF {
			return nil, 0, s.malformed(io.ErrUnexpectedEOF)
		}
		if err != nil {
			return nil, 0, s.malformed(err)
		}
		switch sc.kind {
		case tokStart, tokEmpty:
			switch string(sc.name) {
			case "row":
				line := s.line + 1
				if r := sc.attrValue("r"); r != nil {
					n, err := strconv.Atoi(string(r))
					if err != nil || n <= s.line || n > excelize.TotalRows {
						return nil, 0, s.malformed(fmt.Errorf("row number %q after row %d", r, s.line))
					}
					line = n
				}
				s.line = line
				s.cells = s.cells[:0]
				if sc.kind == tokStart {
					if err := s.readRow(); err != nil {
						return nil, 0, err
					}
				}
				if s.headerRow == 0 {
					if err := s.checkHeader(); err != nil {
						return nil, 0, err
					}
				}
				return s.cells, line, nil
			case "mergeCell":
				if err := s.checkMerge(string(sc.attrValue("ref"))); err != nil {
					return nil, 0, err
				}
			}
		case tokEnd:
			if string(sc.name) == "worksheet" {
				return nil, 0, io.EOF
			}
		}
	}
}

func (s *Sheet) malformed(err error) error {
	return refuse(normalize.CodeInvalidWorkbook, s.line, 0, fmt.Sprintf(
		"sheet %q cannot be read after row %d (%v); open the workbook in Excel, save it as an Excel Workbook (.xlsx) and send it again", s.Name, s.line, err), err)
}

// readRow reads the cells of the row just started into s.cells.
func (s *Sheet) readRow() error {
	sc := s.sc
	var c cell
	last := 0 // the last cell's column, empty or not
	in := ""  // the element whose text is being read: v, t (of is)
	inC, inIS, inRPh := false, false, false
	for {
		if err := sc.next(); err != nil {
			return s.malformed(unexpected(err))
		}
		switch sc.kind {
		case tokStart, tokEmpty:
			empty := sc.kind == tokEmpty
			switch string(sc.name) {
			case "c":
				c = cell{col: last + 1}
				inC = true
				for _, a := range sc.attrs {
					switch string(a.name) {
					case "r":
						col, ok := refColumn(a.value, s.line)
						if !ok {
							return s.malformed(fmt.Errorf("cell reference %q in row %d", a.value, s.line))
						}
						c.col = col
					case "t":
						c.typ = cellType(a.value)
					case "s":
						c.style, _ = strconv.Atoi(string(a.value))
					}
				}
				if c.col <= last || c.col > maxColumns {
					return s.malformed(fmt.Errorf("cell column %d out of order", c.col))
				}
				last = c.col
				if empty {
					inC = false
				}
			case "v":
				c.hasV = true
				if !empty {
					in = "v"
				}
			case "f":
				c.hasF = true
			case "is":
				inIS = !empty
			case "rPh":
				inRPh = !empty
			case "t":
				if inIS && !inRPh && !empty {
					in = "t"
				}
			}
		case tokEnd:
			switch string(sc.name) {
			case "c":
				inC = false
				v, err := s.value(&c)
				if err != nil {
					return err
				}
				if v != "" {
					for len(s.cells) < c.col-1 {
						s.cells = append(s.cells, "")
					}
					s.cells = append(s.cells, v)
				}
			case "v", "t":
				in = ""
			case "is":
				inIS = false
			case "rPh":
				inRPh = false
			case "row":
				return nil
			}
		case tokText:
			if !inC {
				continue
			}
			switch in {
			case "v":
				c.v += string(sc.text)
			case "t":
				c.inline += string(sc.text)
			}
		}
	}
}

// refColumn is the column of a cell reference ("C12": 3) of row line;
// false when it is not a reference in that row.
func refColumn(ref []byte, line int) (int, bool) {
	col, i := 0, 0
	for ; i < len(ref) && i < 3; i++ {
		c := ref[i] | 0x20 // lower case
		if c < 'a' || c > 'z' {
			break
		}
		col = col*26 + int(c-'a'+1)
	}
	if i == 0 || col > maxColumns {
		return 0, false
	}
	n, err := strconv.Atoi(string(ref[i:]))
	return col, err == nil && n == line
}

// cellType is a cell's t attribute, without allocating for the types there are.
func cellType(t []byte) string {
	for _, k := range [...]string{"s", "n", "str", "inlineStr", "b", "e", "d"} {
		if string(t) == k {
			return k
		}
	}
	return string(t)
}

// value is a cell's text, as package doc says.
func (s *Sheet) value(c *cell) (string, error) {
	// openpyxl and other writers that do not calculate write a formula
	// with no <v>, or an empty one; a formula whose result is empty text
	// is t="str" with an empty <v>.
	if c.hasF && (!c.hasV || c.v == "" && c.typ != "str") {
		ref, _ := excelize.CoordinatesToCellName(c.col, s.line)
		return "", refuse(normalize.CodeUncalculatedFormula, s.line, c.col, fmt.Sprintf(
			"cell %s of sheet %q has a formula but no saved value (the workbook was written by a program and never calculated); open it in Excel, let it calculate, save it and send it again, or type the value", ref, s.Name), nil)
	}
	switch c.typ {
	case "s":
		if !c.hasV {
			return "", nil
		}
		i, err := strconv.Atoi(strings.TrimSpace(c.v))
		if err != nil || i < 0 || i >= len(s.sst) {
			return "", s.malformed(fmt.Errorf("shared string %q out of range", c.v))
		}
		return s.sst[i], nil
	case "inlineStr":
		return unescapeOOXML(c.inline), nil
	case "str":
		return c.v, nil
	case "e":
		// An error read as text would pass for an identifier ("#N/A" as
		// an employee_ref): no cell of the file can be trusted to be read.
		ref, _ := excelize.CoordinatesToCellName(c.col, s.line)
		return "", refuse(normalize.CodeFormulaError, s.line, c.col, fmt.Sprintf(
			"cell %s of sheet %q shows the error %s; correct the formula or the value, save the workbook and send it again", ref, s.Name, strings.TrimSpace(c.v)), nil)
	case "b":
		if strings.TrimSpace(c.v) == "1" {
			return "TRUE", nil
		}
		return "FALSE", nil
	case "d": // an ISO 8601 date cell (strict OOXML)
		if d, ok := strings.CutSuffix(c.v, "T00:00:00"); ok && len(d) == len(time.DateOnly) {
			return inDateFormat(d, s.opt.DateFormat), nil
		}
		return c.v, nil
	}
	if !c.hasV || c.v == "" {
		return "", nil
	}
	var f format
	if c.style > 0 && c.style < len(s.styles) {
		f = s.styles[c.style]
	}
	var v string
	var ok bool
	switch f.kind {
	case kindDate:
		v, ok = serialDate(c.v, s.date1904)
		if ok && len(v) == len(time.DateOnly) {
			v = inDateFormat(v, s.opt.DateFormat)
		}
	case kindTime:
		v, ok = serialTime(c.v)
	default:
		v, ok = numberText(strings.TrimSpace(c.v))
		if ok && f.kind == kindZeroPadded {
			v = zeroPadded(v, f.zeros)
		}
	}
	if ok && s.opt.DecimalComma && f.kind != kindDate && f.kind != kindTime {
		v = strings.Replace(v, ".", ",", 1)
	}
	return v, nil
}

// checkHeader refuses a header row (the first with a non-empty cell) with
// an empty cell before its last named one: a merged cell (its value is in
// the first of the merged cells only) or a column without a name.
func (s *Sheet) checkHeader() error {
	last := len(s.cells) - 1
	for last >= 0 && strings.TrimSpace(s.cells[last]) == "" {
		last--
	}
	if last < 0 {
		return nil // a blank row: the header is further down
	}
	s.headerRow = s.line
	for i := 0; i < last; i++ {
		if strings.TrimSpace(s.cells[i]) == "" {
			ref, _ := excelize.CoordinatesToCellName(i+1, s.line)
			return refuse(normalize.CodeInvalidHeaderCell, s.line, i+1, fmt.Sprintf(
				"header cell %s of sheet %q is empty (or merged with the cell before it); give every column of the header its own name, unmerge header cells, and send the file again", ref, s.Name), nil)
		}
	}
	return nil
}

// checkMerge refuses a merged range that covers header cells. Merges are
// stored after the rows, so this is found once the sheet has been read.
func (s *Sheet) checkMerge(ref string) error {
	first, last, _ := strings.Cut(ref, ":")
	_, r1, err1 := excelize.CellNameToCoordinates(first)
	_, r2, err2 := excelize.CellNameToCoordinates(last)
	if err1 != nil || err2 != nil || s.headerRow == 0 || s.headerRow < r1 || s.headerRow > r2 {
		return nil
	}
	return refuse(normalize.CodeInvalidHeaderCell, s.headerRow, 0, fmt.Sprintf(
		"header cells %s of sheet %q are merged; give every column of the header its own cell and name, and send the file again", ref, s.Name), nil)
}
