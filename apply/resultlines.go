package apply

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// A pure first file's result lines, composed in Go while the rows are
// staged. In a pure first file every row's outcome is known as it is
// staged (a valid row is created, an invalid one rejected with its own
// code, field and message), so the goroutine that encodes the COPY text
// also writes each row's line of the result file (normalize.AppendResultLine,
// the Go twin of SQL's result_line) to an unlinked temporary file in the
// spool folder, and notes where each block of records.ResultRowsPerChunk rows ends.
// When the file turns out pure, the blocks go into envelope_results by one
// COPY, as resultFileSQL would have written them (the header as chunk -1,
// rows row_no/records.ResultRowsPerChunk as that chunk), instead of the backend composing,
// sorting and aggregating every line from stage (firstFileResultSQL, ~1.7 s
// of backend CPU at 1,000,000 rows, while Go's core was idle). Where Go
// cannot decide a cell's quoting alone (a cell with a non-ASCII first or
// last character: csv_field's \s follows the database's locale), or the
// rows do not come in increasing row order, or the temporary file cannot be
// written, the lines are dropped and firstFileResultSQL builds the result
// as before: the stored bytes are the same either way
// (intake.TestPureFirstFileMatchesClassify compares them). A file that is
// not pure uses them only when classify left its unchanged rows out of
// classified (storeMerged, below); otherwise they are dropped too.

// resultLines is a file's result lines as staging composed them.
type resultLines struct {
	dir     string // where the file is; storeMerged spools there too
	f       *os.File
	w       *bufio.Writer
	blocks  []resultBlock
	lastRow int
	failed  bool // a line Go cannot compose, or a write failed: the lines are not used
	line    []byte
	// holes: a line Go cannot compose is written as a hole (addHole), which
	// the merge fills with classify's line, instead of dropping the lines.
	holes bool
}

// resultBlock is one stored chunk: its number and its length in the file.
type resultBlock struct {
	n    int32
	size int
}

// newResultLines opens the temporary file in dir; nil (no lines composed)
// when it cannot be created.
func newResultLines(dir string) *resultLines {
	f, err := os.CreateTemp(dir, "payintake-result-*")
	if err != nil {
		return nil
	}
	_ = os.Remove(f.Name()) // unlinked: the space is freed whatever happens
	return &resultLines{dir: dir, f: f, w: bufio.NewWriterSize(f, records.FileBuffer)}
}

// ok tells whether every line was composed and written.
func (l *resultLines) ok() bool { return l != nil && !l.failed }

// fail drops the lines: the result is built in SQL.
func (l *resultLines) fail() {
	l.failed, l.blocks = true, nil
}

// start checks that row comes after the previous row and opens its
// block; false when the lines are dropped.
func (l *resultLines) start(row int) bool {
	if l.failed {
		return false
	}
	if row <= l.lastRow {
		l.fail()
		return false
	}
	l.lastRow = row
	if n := int32(row / records.ResultRowsPerChunk); len(l.blocks) == 0 || l.blocks[len(l.blocks)-1].n != n {
		l.blocks = append(l.blocks, resultBlock{n: n})
	}
	return true
}

// write ends the line in l.line and writes it.
func (l *resultLines) write() {
	l.line = append(l.line, '\n')
	if _, err := l.w.Write(l.line); err != nil {
		l.fail()
		return
	}
	l.blocks[len(l.blocks)-1].size += len(l.line)
}

// addCreated writes the line of a valid row, created, whose five echoed
// cells are cells, already quoted (normalize.AppendResultCells).
func (l *resultLines) addCreated(r *records.StagedRow, cells []byte) {
	if !l.start(r.Row) {
		return
	}
	b := strconv.AppendInt(l.line[:0], int64(r.Line), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(r.Row), 10)
	b = append(b, ",created,"...)
	b = append(b, cells...)
	l.line = append(b, ",,,"...)
	l.write()
}

// addRejected writes the line of an invalid row: the values as the
// partner sent them, its code, field and message. It returns false when Go
// cannot compose the line: the lines are then dropped, or with holes the
// row's line is a hole.
func (l *resultLines) addRejected(r *records.StagedRow) bool {
	if !l.start(r.Row) {
		return true
	}
	b, ok := normalize.AppendResultLine(l.line[:0], r.Line, r.Row, string(records.OutcomeRejected),
		[8]string{r.DEmployeeRef, r.DPayPeriod, r.DComponent, r.DAmount, r.DCurrency, r.Code, r.Field, r.Message})
	if !ok {
		l.hole(r)
		return false
	}
	l.line = b
	l.write()
	return true
}

// holeOutcome is the outcome cell of a hole: a row whose line the database
// composes (its row is in classified when the lines are merged).
const holeOutcome = "?"

// addHole writes the hole of a valid row whose echoed cells Go cannot
// quote (with holes; otherwise the lines are dropped).
func (l *resultLines) addHole(r *records.StagedRow) {
	if l.start(r.Row) {
		l.hole(r)
	}
}

// hole writes row r's hole, once start has opened its block.
func (l *resultLines) hole(r *records.StagedRow) {
	if !l.holes {
		l.fail()
		return
	}
	b := strconv.AppendInt(l.line[:0], int64(r.Line), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(r.Row), 10)
	l.line = append(append(b, ','), holeOutcome...)
	l.write()
}

// finish flushes the lines once staging is done.
func (l *resultLines) finish() {
	if l == nil || l.failed || l.w == nil {
		return
	}
	if err := l.w.Flush(); err != nil {
		l.fail()
	}
	l.w = nil // its buffer is garbage now
}

// close releases the temporary file.
func (l *resultLines) close() {
	if l != nil {
		_ = l.f.Close()
	}
}

// store writes the result file of envelope env, its header then the
// blocks, into envelope_results by one COPY.
func (l *resultLines) store(ctx context.Context, tx pgx.Tx, env int64) error {
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	src := &resultSource{env: env, lines: l, r: l.f, next: -1}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"envelope_results"}, []string{"envelope_id", "n", "data"}, src); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	return nil
}

// resultSource gives CopyFrom the header, then each block read from the
// file into one buffer, a read a block (CopyFrom encodes a row's values
// before it asks for the next row); with merge, each block as merge
// rewrites it.
type resultSource struct {
	env   int64
	lines *resultLines
	r     io.Reader
	next  int // -1: the header; else the index of the next block
	n     int32
	buf   []byte
	err   error
	merge *merger
	out   []byte
}

func (s *resultSource) Next() bool {
	if s.err != nil {
		return false
	}
	if s.next < 0 {
		s.n, s.buf, s.next = -1, append(s.buf[:0], records.ResultHeader...), 0
		return true
	}
	if s.next >= len(s.lines.blocks) {
		return false
	}
	blk := s.lines.blocks[s.next]
	s.next++
	if cap(s.buf) < blk.size {
		s.buf = make([]byte, blk.size)
	}
	s.buf = s.buf[:blk.size]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		s.err = fmt.Errorf("read result lines: %w", err)
		return false
	}
	s.n = blk.n
	if s.merge != nil {
		if s.out, s.err = s.merge.block(s.out[:0], s.buf); s.err != nil {
			return false
		}
		if s.next == len(s.lines.blocks) && s.merge.have {
			s.err = fmt.Errorf("store result: classified row %d after the last staged line", s.merge.cur.row)
			return false
		}
	}
	return true
}

func (s *resultSource) Values() ([]any, error) {
	if s.merge != nil && s.n >= 0 {
		return []any{s.env, s.n, s.out}, nil
	}
	return []any{s.env, s.n, s.buf}, nil
}

func (s *resultSource) Err() error { return s.err }

// A resubmission's result lines, merged. When classify leaves a file's
// unchanged rows out of classified (skipUnchanged), or a compared
// resubmission stages only the rows that changed (applyCompared), its
// result file is staging's lines (resultLines, composed as if every valid
// row were created) with each row's outcome as classify decided: a row
// that is in classified takes the line classify composed, any other is
// unchanged, which changes only its outcome cell ("created" becomes
// "unchanged": an unchanged row has no code, field or message).
// classified's rows (the 1% of a payroll resubmission that changed) are
// spooled in row order to a temporary file, and each block of staging's
// lines is rewritten as it goes into the COPY, so the backend neither
// joins stage with classified nor composes, sorts and aggregates a line
// per staged row (resultWithUnchangedSQL, ~0.9-1.1 s of CPU at 1,000,000
// rows). When staging could not compose every line, the database builds
// the result as before. The bytes are the same either way:
// intake.TestResubmissionWithoutUnchangedRowsMatchesClassify compares them
// with the full classify's.
//
// A compared resubmission (mergeCompared) stages neither its rejected
// rows nor its unchanged ones: a rejected line staging composed that is
// not in classified is kept as it is, and a hole (a line Go could not
// compose, whose row was staged) must be filled by classified. Otherwise
// every rejected row is in classified, and a hole is an error.

// classifiedLine is one row of classified: its row number and line.
type classifiedLine struct {
	row  int
	line []byte
}

// merger rewrites staging's lines with classify's outcomes: cur is the
// first classified row not yet met (have false once they are all met),
// read in row order from r.
type merger struct {
	r        *bufio.Reader
	cur      classifiedLine
	have     bool
	err      error
	compared bool // mergeCompared
}

// mergeMode is how storeMerged treats a line classified does not hold.
type mergeMode int

const (
	mergeSkipped   mergeMode = iota // classify left out the unchanged rows only
	mergeCompared                   // a compared resubmission: rejected rows kept, holes filled
	mergeUnchanged                  // a compared resubmission with no row classified (no classified)
)

// storeMerged writes the result file of envelope env from staging's lines
// and classified's (see merger), by one COPY; classified's lines are first
// spooled to a temporary file beside staging's.
func (l *resultLines) storeMerged(ctx context.Context, tx pgx.Tx, env int64, mode mergeMode) error {
	spool, err := os.CreateTemp(l.dir, "payintake-classified-*")
	if err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	_ = os.Remove(spool.Name())
	defer func() { _ = spool.Close() }()
	if mode != mergeUnchanged {
		if err := spoolClassified(ctx, tx, spool); err != nil {
			return err
		}
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	m := &merger{r: bufio.NewReaderSize(spool, records.FileBuffer), compared: mode != mergeSkipped}
	if m.advance(); m.err != nil {
		return m.err
	}
	src := &resultSource{env: env, lines: l, r: l.f, next: -1, merge: m}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"envelope_results"}, []string{"envelope_id", "n", "data"}, src); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	return nil
}

// spoolClassified writes classified's rows to w in row order: each its
// row number and the length of its line (uvarints), then the line.
func spoolClassified(ctx context.Context, tx pgx.Tx, w io.WriteSeeker) error {
	rows, err := tx.Query(ctx, `SELECT row_no, result_line FROM classified ORDER BY row_no`)
	if err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	defer rows.Close()
	bw := bufio.NewWriterSize(w, records.FileBuffer)
	var buf []byte
	for rows.Next() {
		var row int32
		var line []byte
		if err := rows.Scan(&row, &line); err != nil {
			return fmt.Errorf("store result: %w", err)
		}
		buf = binary.AppendUvarint(buf[:0], uint64(row))
		buf = binary.AppendUvarint(buf, uint64(len(line)))
		if _, err := bw.Write(append(buf, line...)); err != nil {
			return fmt.Errorf("store result: spool classified lines: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("store result: spool classified lines: %w", err)
	}
	if _, err := w.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	return nil
}

// advance reads the next classified row into cur (have false at the end).
func (m *merger) advance() {
	row, err := binary.ReadUvarint(m.r)
	if errors.Is(err, io.EOF) {
		m.have = false
		return
	}
	var n uint64
	if err == nil {
		n, err = binary.ReadUvarint(m.r)
	}
	if err == nil {
		if uint64(cap(m.cur.line)) < n {
			m.cur.line = make([]byte, n)
		}
		m.cur.line = m.cur.line[:n]
		_, err = io.ReadFull(m.r, m.cur.line)
	}
	if err != nil {
		m.err, m.have = fmt.Errorf("store result: read spooled classified lines: %w", err), false
		return
	}
	m.cur.row, m.have = int(row), true
}

// block appends to dst the lines of src, one block of staging's lines,
// each as classify decided it. A line staging wrote as other than created
// that classified does not hold is an error (but a rejected one of a
// compared resubmission): every such row is in classified.
func (m *merger) block(dst, src []byte) ([]byte, error) {
	const created = "created,"
	const rejected = "rejected,"
	for len(src) > 0 {
		end := bytes.IndexByte(src, '\n')
		if end < 0 {
			return nil, errors.New("store result: a result line without its line break")
		}
		line := src[:end]
		src = src[end+1:]
		// line,row,outcome,...: the line and row numbers are digits.
		c1 := bytes.IndexByte(line, ',')
		c2 := -1
		if c1 >= 0 {
			if i := bytes.IndexByte(line[c1+1:], ','); i >= 0 {
				c2 = c1 + 1 + i
			}
		}
		if c2 < 0 {
			return nil, fmt.Errorf("store result: staged line %q has no row number", line)
		}
		row := 0
		for _, c := range line[c1+1 : c2] {
			row = row*10 + int(c-'0')
		}
		if m.have && m.cur.row == row {
			dst = append(append(dst, m.cur.line...), '\n')
			if m.advance(); m.err != nil {
				return nil, m.err
			}
			continue
		}
		if m.have && m.cur.row < row {
			return nil, fmt.Errorf("store result: classified row %d has no staged line", m.cur.row)
		}
		rest := line[c2+1:]
		switch {
		case bytes.HasPrefix(rest, []byte(created)):
			dst = append(dst, line[:c2+1]...)
			dst = append(dst, string(records.OutcomeUnchanged)...)
			dst = append(dst, rest[len(created)-1:]...)
		case m.compared && bytes.HasPrefix(rest, []byte(rejected)):
			dst = append(dst, line...)
		default:
			return nil, fmt.Errorf("store result: row %d is neither in classified nor created as staged", row)
		}
		dst = append(dst, '\n')
	}
	return dst, nil
}
