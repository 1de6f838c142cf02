package normalize

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Reader streams a CSV file: decode → parse → normalise, one row at a time,
// never holding the whole file. Create it with NewReader.
type Reader struct {
	s       Settings
	delim   rune       // 0 for a source other than CSV
	src     cellSource // the file's records: CSV, or a Rows (a workbook's sheet)
	cols    [8]int     // file column index of each canonical field, -1 when absent
	nHeader int        // number of header cells (trailing empty ones dropped)
	header  []string   // the header cells as the file writes them
	extra   []int      // file column index of each Settings.Extra column, -1 when absent
	index   int
	err     error // sticky: io.EOF or a *ParseError or a read error
}

// NewReader reads the header of r and prepares to stream its rows. It returns
// a *ParseError for a file that cannot be used (empty_file, invalid_encoding,
// nul_byte, line_too_long, too_many_columns, missing_column,
// duplicate_column, malformed_row for an unparsable header), a plain error for
// invalid Settings, or the underlying read error.
func NewReader(r io.Reader, s Settings) (*Reader, error) {
	if s.Delimiter != 0 && !validDelim(s.Delimiter) {
		return nil, fmt.Errorf("normalize: delimiter %q cannot be used for CSV", s.Delimiter)
	}
	if s.DateFormat != "" {
		if _, err := ParseDateFormat(s.DateFormat); err != nil {
			return nil, fmt.Errorf("normalize: %w", err)
		}
		toks, err := parseDateTokens(s.DateFormat)
		if err != nil {
			return nil, fmt.Errorf("normalize: %w", err)
		}
		s.dateTokens = toks // parsed once per file, not once per row
	}
	text, err := decodeInput(r, s.maxLineBytes())
	if err != nil {
		return nil, err
	}
	headBytes, err := readHeaderLine(text, s.maxLineBytes())
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(headBytes)) == 0 {
		return nil, &ParseError{Err: CodeEmptyFile, Message: "the file is empty or has no header line; send a CSV file whose first line names the columns"}
	}
	delim := s.Delimiter
	if delim == 0 {
		delim = detectDelimiter(headBytes)
	}
	cr := csv.NewReader(io.MultiReader(bytes.NewReader(headBytes), text))
	cr.Comma = delim
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	rd := &Reader{s: s, delim: delim, src: csvSource{cr}}
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Rows is a file's records when something other than this package's CSV
// reader reads them (a workbook's sheet, say): each row's cells, the line
// a partner knows it by (a sheet's row number), and io.EOF after the
// last. An error that is a *ParseError rejects the file whole, as
// NewReader's and Reader.Next's do; the source says where (its StartLine).
type Rows interface {
	Row() (cells []string, line int, err error)
}

// NewRowsReader is NewReader for records read by rows rather than parsed
// from CSV text: the same header mapping, limits, normalisation and errors
// (Settings.Delimiter and MaxLineBytes do not apply). Cells are taken as
// they are, so the source gives numbers in Settings' decimal convention.
func NewRowsReader(rows Rows, s Settings) (*Reader, error) {
	if s.DateFormat != "" {
		toks, err := parseDateTokens(s.DateFormat)
		if err != nil {
			return nil, fmt.Errorf("normalize: %w", err)
		}
		s.dateTokens = toks
	}
	rd := &Reader{s: s, src: &rowsSource{rows: rows}}
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	return rd, nil
}

// cellSource gives a file's records one at a time (the slice may be reused
// by the next read) and where a cell of the last one is.
type cellSource interface {
	read() ([]string, error)
	pos(field int) (line, column int)
}

type csvSource struct{ r *csv.Reader }

func (c csvSource) read() ([]string, error) { return c.r.Read() }

func (c csvSource) pos(field int) (int, int) { return c.r.FieldPos(field) }

// rowsSource reads a Rows; its cells have lines but no byte columns.
type rowsSource struct {
	rows Rows
	line int
}

func (r *rowsSource) read() ([]string, error) {
	cells, line, err := r.rows.Row()
	if err != nil {
		return nil, err
	}
	r.line = line
	return cells, nil
}

func (r *rowsSource) pos(int) (int, int) { return r.line, 0 }

func (rd *Reader) isCSV() bool {
	_, ok := rd.src.(csvSource)
	return ok
}

func validDelim(r rune) bool {
	return r != '"' && r != '\r' && r != '\n' && r != 0 && utf8.ValidRune(r) && r != utf8.RuneError
}

// readHeaderLine returns the bytes up to and including the first line break
// outside quotes that ends a non-blank line (leading blank lines included).
func readHeaderLine(text io.Reader, max int) ([]byte, error) {
	var head []byte
	var one [1]byte
	inQuote := false
	for {
		n, err := text.Read(one[:])
		if n == 1 {
			c := one[0]
			head = append(head, c)
			if c == '"' {
				inQuote = !inQuote
			}
			if c == '\n' && !inQuote && len(bytes.TrimSpace(head)) > 0 {
				return head, nil
			}
			if len(head) > max {
				return nil, &ParseError{StartLine: 1, Line: 1, Err: CodeLineTooLong, Message: fmt.Sprintf(
					"the header is longer than %d bytes; check that the file is really CSV", max)}
			}
		}
		if err == io.EOF {
			return head, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// detectDelimiter returns the most frequent of , ; tab | outside quotes in
// the header line; ties go to the earlier in that list, none to ','.
func detectDelimiter(head []byte) rune {
	cands := []byte{',', ';', '\t', '|'}
	var counts [4]int
	inQuote := false
	for _, c := range head {
		if c == '"' {
			inQuote = !inQuote
			continue
		}
		if inQuote {
			continue
		}
		for i, d := range cands {
			if c == d {
				counts[i]++
			}
		}
	}
	best := 0
	for i := 1; i < len(cands); i++ {
		if counts[i] > counts[best] {
			best = i
		}
	}
	return rune(cands[best])
}

// canonicalColumn maps a header cell to a canonical field name, "" if unknown.
func canonicalColumn(h string) string { return matchColumn(h, FieldNames[:]) }

// matchColumn maps a header cell to one of names, ignoring case, surrounding
// spaces and '_', '-', ' ' differences; "" if none matches.
func matchColumn(h string, names []string) string {
	key := HeaderKey(h)
	for _, f := range names {
		if HeaderKey(f) == key {
			return f
		}
	}
	return ""
}

// HeaderKey is what a header is matched by: lower-cased, without surrounding
// space, '_', '-' or ' '. Two headers with one key are the same column.
func HeaderKey(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		if r == '_' || r == '-' || r == ' ' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fieldOf maps a header cell to the field it carries: a header the
// profile's Columns lists for a field, else the field's own name when the
// profile does not map that field; "" for any other column.
func (s Settings) fieldOf(h string) string {
	if len(s.Columns) > 0 {
		key := HeaderKey(h)
		for _, f := range FieldNames {
			for _, name := range s.Columns[f] {
				if HeaderKey(name) == key {
					return f
				}
			}
		}
	}
	c := canonicalColumn(h)
	if _, mapped := s.Columns[c]; mapped {
		return ""
	}
	return c
}

// missingColumnMessage says which header a required field lacks, in the
// profile's words when it maps the field.
func (s Settings) missingColumnMessage(f string) string {
	names := s.Columns[f]
	if len(names) == 0 {
		return fmt.Sprintf("the header has no %s column; add a column named %s (names ignore case, spaces, _ and -)", f, f)
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf("the header has no %s column: %s names it %s; send the column under that header (names ignore case, spaces, _ and -) or ask the platform to change the profile",
		f, s.Profile, strings.Join(quoted, " or "))
}

func (rd *Reader) readHeader() error {
	var rec []string
	for {
		var err error
		rec, err = rd.src.read()
		if err != nil {
			return rd.fileLevel(err, true)
		}
		if len(trimTrailingEmpty(rec)) > 0 || len(rec) > rd.s.maxCells() {
			break
		}
	}
	if len(rec) > rd.s.maxCells() {
		return &ParseError{StartLine: 1, Line: 1, Err: CodeTooManyColumns, Message: fmt.Sprintf(
			"the header has %d columns, more than the limit of %d; send only the payroll columns", len(rec), rd.s.maxCells())}
	}
	line, _ := rd.src.pos(0)
	rec = trimTrailingEmpty(rec)
	rd.nHeader = len(rec)
	rd.header = slices.Clone(rec)
	rd.extra = make([]int, len(rd.s.Extra))
	for i := range rd.extra {
		rd.extra[i] = -1
	}
	firstAt := map[string]int{}
	for i, h := range rec {
		c := rd.s.fieldOf(h)
		if c == "" {
			if x := matchColumn(h, rd.s.Extra); x != "" && rd.extra[slices.Index(rd.s.Extra, x)] < 0 {
				rd.extra[slices.Index(rd.s.Extra, x)] = i
			}
			continue
		}
		if j, dup := firstAt[c]; dup {
			return &ParseError{StartLine: line, Line: line, Err: CodeDuplicateColumn, Field: c, Message: fmt.Sprintf(
				"the header has %s twice (columns %d %q and %d %q); keep only one of them", c, j+1, rec[j], i+1, h)}
		}
		firstAt[c] = i
	}
	required := []string{FieldEmployeeRef, FieldPayPeriod, FieldComponent, FieldAmount}
	if strings.TrimSpace(rd.s.Currency) == "" {
		required = append(required, FieldCurrency)
	}
	for _, f := range required {
		if _, ok := firstAt[f]; !ok {
			msg := rd.s.missingColumnMessage(f)
			if rd.delimGuessed() && len(rec) == 1 {
				msg += fmt.Sprintf(", and check the delimiter (the header was read with %q)", rd.delim)
			}
			return &ParseError{StartLine: line, Line: line, Err: CodeMissingColumn, Field: f, Message: msg}
		}
	}
	rd.cols = mapColumns(firstAt)
	return nil
}

func (rd *Reader) delimGuessed() bool { return rd.isCSV() && rd.s.Delimiter == 0 }

// mapColumns gives the file column of each of FieldNames, -1 for a field
// the header does not have. Rows are then read by index from the raw record,
// which cell counting, trailing-cell trimming and line numbers need.
func mapColumns(at map[string]int) [8]int {
	var cols [8]int
	for i, f := range FieldNames {
		cols[i] = -1
		if j, ok := at[f]; ok {
			cols[i] = j
		}
	}
	return cols
}

func trimTrailingEmpty(rec []string) []string {
	n := len(rec)
	for n > 0 && strings.TrimSpace(rec[n-1]) == "" {
		n--
	}
	return rec[:n]
}

// fileLevel turns an error from csv.Reader into the Reader's sticky error.
func (rd *Reader) fileLevel(err error, header bool) error {
	var fe *ParseError
	var pe *csv.ParseError
	switch {
	case errors.As(err, &fe):
		return fe
	case err == io.EOF && header && !rd.isCSV():
		return &ParseError{Err: CodeEmptyFile, Message: "the sheet is empty or has no header row; send a sheet whose first row names the columns"}
	case err == io.EOF && header:
		return &ParseError{Err: CodeEmptyFile, Message: "the file is empty or has no header line; send a CSV file whose first line names the columns"}
	case header && errors.As(err, &pe):
		return &ParseError{StartLine: pe.StartLine, Line: pe.Line, Column: pe.Column, Err: Cause(CodeMalformedRow, pe), Message: fmt.Sprintf(
			"the header line cannot be read as CSV (%v at line %d, column %d); fix the quoting of the header", pe.Err, pe.Line, pe.Column)}
	}
	return err
}

// ColumnUse says which column of the file carries a field.
type ColumnUse struct {
	Field  string `json:"field"`
	Header string `json:"header"` // as the file writes it
	Column int    `json:"column"` // 1-based
}

// Columns says which column carries each field the file has, in
// FieldNames order: the mapping a preview shows.
func (rd *Reader) Columns() []ColumnUse {
	var cs []ColumnUse
	for i, f := range FieldNames {
		if j := rd.cols[i]; j >= 0 {
			cs = append(cs, ColumnUse{Field: f, Header: rd.header[j], Column: j + 1})
		}
	}
	return cs
}

// Delimiter returns the delimiter in use (the partner's or the detected
// one), 0 for rows not read from CSV.
func (rd *Reader) Delimiter() rune { return rd.delim }

// Next returns the next data row. Blank rows (no non-empty cell) are skipped
// and not counted. It returns io.EOF at the end, and a *ParseError for a
// file-level problem found mid-stream (invalid_encoding, nul_byte,
// line_too_long, too_many_columns); once Next has returned an error it
// returns the same error again. Next is Finish(Read()).
func (rd *Reader) Next() (Row, error) {
	p, err := rd.Read()
	if err != nil {
		return Row{}, err
	}
	return rd.Finish(p), nil
}

// A Pending is a data row that Read has taken from the file and Finish has
// yet to normalise.
type Pending struct {
	row   Row    // line and index; Err when the row cannot be read as CSV
	raw   RawRow // the canonical fields' cells
	cells int    // the row's cells, trailing empty ones dropped
}

// Index is the row's number among the file's data rows (Row.Index), known
// before Finish: a reader that needs only some rows finishes only those.
func (p Pending) Index() int { return p.row.Index }

// Read takes the next data row from the file without normalising it, with
// Next's errors. Reads are sequential; the rows read can then be finished
// in any order, by several goroutines at once.
func (rd *Reader) Read() (Pending, error) {
	if rd.err != nil {
		return Pending{}, rd.err
	}
	for {
		rec, err := rd.src.read()
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				rd.index++
				return Pending{row: Row{Line: pe.StartLine, Index: rd.index, Err: &RowError{Code: CodeMalformedRow, Err: pe, Message: fmt.Sprintf(
					"the row cannot be read as CSV (%v at line %d, column %d); quote cells that contain quotes, delimiters or line breaks, and double quotes inside quoted cells", pe.Err, pe.Line, pe.Column)}}}, nil
			}
			rd.err = rd.fileLevel(err, false)
			return Pending{}, rd.err
		}
		line, _ := rd.src.pos(0)
		if len(rec) > rd.s.maxCells() {
			atLine, atCol := rd.src.pos(rd.s.maxCells()) // the first cell beyond the limit
			rd.err = &ParseError{StartLine: line, Line: atLine, Column: atCol, Err: CodeTooManyColumns, Message: fmt.Sprintf(
				"line %d has %d cells, more than the limit of %d; check the delimiter and the quoting", line, len(rec), rd.s.maxCells())}
			return Pending{}, rd.err
		}
		rec = trimTrailingEmpty(rec)
		if len(rec) == 0 {
			continue
		}
		rd.index++
		p := Pending{row: Row{Line: line, Index: rd.index}, raw: rd.rawRow(rec), cells: len(rec)}
		for _, j := range rd.extra {
			v := ""
			if j >= 0 && j < len(rec) {
				v = rec[j]
			}
			p.row.Extra = append(p.row.Extra, v)
		}
		return p, nil
	}
}

// Finish normalises a row Read took from the file. It changes nothing in
// the Reader, so it is safe for concurrent use.
func (rd *Reader) Finish(p Pending) Row {
	row := p.row
	if row.Err != nil {
		return row
	}
	row.Record, row.Display, row.Err = Normalize(p.raw, rd.s)
	if row.Err != nil && row.Err.Held {
		row.Held, row.Err = row.Err, nil
	}
	if p.cells > rd.nHeader {
		msg := fmt.Sprintf("the row has %d cells but the header has %d columns; remove the extra cells or quote values that contain %q", p.cells, rd.nHeader, rd.delim)
		if !rd.isCSV() {
			msg = fmt.Sprintf("the row has %d cells but the header has %d columns; remove the extra cells or give their column a header", p.cells, rd.nHeader)
		}
		row.Err = &RowError{Code: CodeTooManyCells, Message: msg}
	}
	if row.Err != nil {
		row.Record, row.Held = Record{}, nil
	}
	return row
}

func (rd *Reader) rawRow(rec []string) RawRow {
	cell := func(i int) string {
		j := rd.cols[i]
		if j < 0 || j >= len(rec) {
			return ""
		}
		return rec[j]
	}
	return RawRow{
		EmployeeRef: cell(0), PayPeriod: cell(1), Component: cell(2), Amount: cell(3),
		Currency: cell(4), Hours: cell(5), Rate: cell(6), PayDate: cell(7),
	}
}
