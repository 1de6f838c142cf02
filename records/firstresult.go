package records

import (
	"bufio"
	"context"
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
// spool folder, and notes where each block of resultBlockRows rows ends.
// When the file turns out pure, the blocks go into envelope_results by one
// COPY, as resultFileSQL would have written them (the header as chunk -1,
// rows row_no/4096 as chunk row_no/4096), instead of the backend composing,
// sorting and aggregating every line from stage (firstFileResultSQL, ~1.7 s
// of backend CPU at 1,000,000 rows, while Go's core was idle). Where Go
// cannot decide a cell's quoting alone (a cell with a non-ASCII first or
// last character: csv_field's \s follows the database's locale), or the
// rows do not come in increasing row order, or the temporary file cannot be
// written, the lines are dropped and firstFileResultSQL builds the result
// as before: the stored bytes are the same either way
// (intake.TestPureFirstFileMatchesClassify compares them). A file that is
// not pure drops them too.

// resultBlockRows is how many row numbers share one stored chunk of a
// result file: resultFileSQL's row_no / 4096.
const resultBlockRows = 4096

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
	if n := int32(row / resultBlockRows); len(l.blocks) == 0 || l.blocks[len(l.blocks)-1].n != n {
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
// before it asks for the next row).
type resultSource struct {
	env   int64
	lines *resultLines
	r     io.Reader
	next  int // -1: the header; else the index of the next block
	n     int32
	buf   []byte
	err   error
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
	return true
}

func (s *resultSource) Values() ([]any, error) { return []any{s.env, s.n, s.buf}, nil }

func (s *resultSource) Err() error { return s.err }
