package records

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
)

// A pure first file's result lines, composed in Go while the rows are
// staged. In a pure first file every row's outcome is known as it is
// staged (a valid row is created, an invalid one rejected with its own
// code, field and message), so the goroutine that encodes the COPY text
// also writes each row's line of the result file (normalize.AppendResultLine,
// the Go twin of SQL's result_line) to an unlinked temporary file in the
// spool folder, and notes where each block of resultRowsPerChunk rows ends.
// When the file turns out pure, the blocks go into envelope_results by one
// COPY, as resultFileSQL would have written them (the header as chunk -1,
// rows row_no/resultRowsPerChunk as that chunk), instead of the backend composing,
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
	f       *os.File
	w       *bufio.Writer
	blocks  []resultBlock
	lastRow int
	failed  bool // a line Go cannot compose, or a write failed: the lines are not used
	line    []byte
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
	return &resultLines{f: f, w: bufio.NewWriterSize(f, stageBlockSize)}
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
	if n := int32(row / resultRowsPerChunk); len(l.blocks) == 0 || l.blocks[len(l.blocks)-1].n != n {
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
func (l *resultLines) addCreated(r *StagedRow, cells []byte) {
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
// partner sent them, its code, field and message.
func (l *resultLines) addRejected(r *StagedRow) {
	if !l.start(r.Row) {
		return
	}
	b, ok := normalize.AppendResultLine(l.line[:0], r.Line, r.Row, string(OutcomeRejected),
		[8]string{r.DEmployeeRef, r.DPayPeriod, r.DComponent, r.DAmount, r.DCurrency, r.Code, r.Field, r.Message})
	if !ok {
		l.fail()
		return
	}
	l.line = b
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
		s.n, s.buf, s.next = -1, append(s.buf[:0], ResultHeader...), 0
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
		if s.next == len(s.lines.blocks) && s.merge.next != len(s.merge.rows) {
			s.err = fmt.Errorf("store result: %d classified row(s) after the last staged line", len(s.merge.rows)-s.merge.next)
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
// unchanged rows out of classified (skipUnchanged), its result file is
// staging's lines (resultLines, composed as if every valid row were
// created) with each row's outcome as classify decided: a row that is in
// classified takes the line classify composed, any other is unchanged,
// which changes only its outcome cell ("created" becomes "unchanged": an
// unchanged row has no code, field or message). classified's few rows
// (the 1% of a payroll resubmission that changed) are read in row order,
// and each block of staging's lines is rewritten as it goes into the
// COPY, so the backend neither joins stage with classified nor composes,
// sorts and aggregates a line per staged row (resultWithUnchangedSQL,
// ~0.9-1.1 s of CPU at 1,000,000 rows). Past mergeMaxRows rows in
// classified (memory), or when staging could not compose every line, the
// database builds the result as before. The bytes are the same either
// way: intake.TestResubmissionWithoutUnchangedRowsMatchesClassify compares
// them with the full classify's.

// mergeMaxRows bounds the classified lines held in memory for a merge:
// about 10 MB at the longest messages.
const mergeMaxRows = 1 << 16

// classifiedRows is how many rows classify wrote into classified, the
// unchanged ones left out: every counted row but those.
func classifiedRows(counts map[string]int) int {
	n := 0
	for o, c := range counts {
		if o != string(OutcomeUnchanged) {
			n += c
		}
	}
	return n
}

// classifiedLine is one row of classified: its row number and line.
type classifiedLine struct {
	row  int
	line string
}

// merger rewrites staging's lines with classify's outcomes: rows are
// classified's, in row order; next is the first not yet met.
type merger struct {
	rows []classifiedLine
	next int
}

// storeMerged writes the result file of envelope env from staging's lines
// and classified's (see merger), by one COPY.
func (l *resultLines) storeMerged(ctx context.Context, tx pgx.Tx, env int64) error {
	rows, err := tx.Query(ctx, `SELECT row_no, result_line FROM classified ORDER BY row_no`)
	if err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	var m merger
	for rows.Next() {
		var c classifiedLine
		if err := rows.Scan(&c.row, &c.line); err != nil {
			return fmt.Errorf("store result: %w", err)
		}
		m.rows = append(m.rows, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	src := &resultSource{env: env, lines: l, r: l.f, next: -1, merge: &m}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"envelope_results"}, []string{"envelope_id", "n", "data"}, src); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	return nil
}

// block appends to dst the lines of src, one block of staging's lines,
// each as classify decided it. A line staging wrote as other than created
// (an invalid row's) that classified does not hold is an error: every
// such row is in classified.
func (m *merger) block(dst, src []byte) ([]byte, error) {
	const created = "created,"
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
		if m.next < len(m.rows) && m.rows[m.next].row == row {
			dst = append(append(dst, m.rows[m.next].line...), '\n')
			m.next++
			continue
		}
		if m.next < len(m.rows) && m.rows[m.next].row < row {
			return nil, fmt.Errorf("store result: classified row %d has no staged line", m.rows[m.next].row)
		}
		if !bytes.HasPrefix(line[c2+1:], []byte(created)) {
			return nil, fmt.Errorf("store result: row %d is neither in classified nor created as staged", row)
		}
		dst = append(dst, line[:c2+1]...)
		dst = append(dst, string(OutcomeUnchanged)...)
		dst = append(dst, line[c2+len(created):]...)
		dst = append(dst, '\n')
	}
	return dst, nil
}
