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

// The result file, composed in Go. Every row's line is written as the row
// is staged (normalize.AppendResultLine, normalize's one writer of result
// lines): an invalid row rejected with its own code, field and message, a
// valid row as if it were created. The goroutine that encodes the COPY
// writes them to an unlinked temporary file in the spool folder and notes
// where each block of records.ResultRowsPerChunk rows ends. A pure first
// file's lines are its result as they are (store); any other file's are
// rewritten with classify's decisions as they go into envelope_results
// (storeMerged, below). Either way the blocks go in by one COPY (the header
// as chunk -1, rows row_no/records.ResultRowsPerChunk as that chunk), while
// the rows stream, rather than the backend composing, sorting and
// aggregating every line.

// resultLines is a file's result lines as staging composed them.
type resultLines struct {
	dir     string // where the file is; storeMerged spools there too
	f       *os.File
	w       *bufio.Writer
	blocks  []resultBlock
	lastRow int
	err     error // why the lines could not be written; they are not used
	line    []byte
}

// resultBlock is one stored chunk: its number and its length in the file.
type resultBlock struct {
	n    int32
	size int
}

// newResultLines opens the temporary file in dir.
func newResultLines(dir string) (*resultLines, error) {
	f, err := os.CreateTemp(dir, "payintake-result-*")
	if err != nil {
		return nil, fmt.Errorf("result lines: %w", err)
	}
	_ = os.Remove(f.Name()) // unlinked: the space is freed whatever happens
	return &resultLines{dir: dir, f: f, w: bufio.NewWriterSize(f, records.FileBuffer)}, nil
}

// ok tells whether every line was composed and written.
func (l *resultLines) ok() bool { return l != nil && l.err == nil }

// fail drops the lines, for err.
func (l *resultLines) fail(err error) {
	if l.err == nil {
		l.err, l.blocks = err, nil
	}
}

// start checks that row comes after the previous row and opens its
// block; false when the lines are dropped.
func (l *resultLines) start(row int) bool {
	if l.err != nil {
		return false
	}
	if row <= l.lastRow {
		l.fail(fmt.Errorf("result lines: row %d after row %d", row, l.lastRow))
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
		l.fail(fmt.Errorf("result lines: %w", err))
		return
	}
	l.blocks[len(l.blocks)-1].size += len(l.line)
}

// addCreated writes the line of a valid row, created, whose five echoed
// cells are cells, already quoted (appendEchoedCells).
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
// partner sent them, its code, field and message.
func (l *resultLines) addRejected(r *records.StagedRow) {
	if !l.start(r.Row) {
		return
	}
	l.line = appendRowLine(l.line[:0], r, string(records.OutcomeRejected), r.Code, r.Field, r.Message)
	l.write()
}

// finish flushes the lines once staging is done.
func (l *resultLines) finish() {
	if l == nil || l.err != nil || l.w == nil {
		return
	}
	if err := l.w.Flush(); err != nil {
		l.fail(fmt.Errorf("result lines: %w", err))
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
	if l.err != nil {
		return fmt.Errorf("store result: %w", l.err)
	}
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

// Any other file's result lines, merged with classify's decisions. The
// rows classify wrote into classified (every row, or with skipUnchanged
// the 1% of a payroll resubmission that changed; for a compared
// resubmission the rows read again) are spooled in row order to a
// temporary file, each with its outcome and its code, field and message
// as cells (classifiedLine), and each block of staging's lines is
// rewritten as it goes into the COPY: a created line of a row classified
// holds takes classify's outcome, code, field and message after its own
// echoed cells; a created line of a row it does not hold is unchanged,
// which changes only its outcome cell (an unchanged row has no code, field
// or message); a rejected line (an invalid row, which classify rejects
// with the row's own code, field and message) is kept as it is. So the
// backend neither joins stage with classified nor composes, sorts and
// aggregates a line per staged row.

// classifiedLine is one row of classified: its row number, outcome, and
// its code, field and message as cells of a result line.
type classifiedLine struct {
	row     int
	outcome []byte
	tail    []byte
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
	mergeClassified mergeMode = iota // every row staged was classified, but classify may have left out the unchanged ones
	mergeCompared                    // a compared resubmission: the rejected rows not read again are not in classified
	mergeUnchanged                   // a compared resubmission with no row classified (no classified)
)

// storeMerged writes the result file of envelope env from staging's lines
// and classified's decisions (see merger), by one COPY; classified's rows
// are first spooled to a temporary file beside staging's.
func (l *resultLines) storeMerged(ctx context.Context, tx pgx.Tx, env int64, mode mergeMode) error {
	if l.err != nil {
		return fmt.Errorf("store result: %w", l.err)
	}
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
	m := &merger{r: bufio.NewReaderSize(spool, records.FileBuffer), compared: mode != mergeClassified}
	if m.advance(); m.err != nil {
		return m.err
	}
	src := &resultSource{env: env, lines: l, r: l.f, next: -1, merge: m}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"envelope_results"}, []string{"envelope_id", "n", "data"}, src); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	return nil
}

// classifiedLinesSQL reads classified's rows for the result lines.
var classifiedLinesSQL = query("ClassifiedLines")

// spoolClassified writes classified's rows but the unchanged ones (the
// merge's answer for a created line classified does not hold: most rows of
// a resubmission with a sequence number, which classify keeps) to w in row
// order: each its row number, the length of its outcome and of its code,
// field and message as cells (uvarints), then those two.
func spoolClassified(ctx context.Context, tx pgx.Tx, w io.WriteSeeker) error {
	rows, err := tx.Query(ctx, classifiedLinesSQL)
	if err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	defer rows.Close()
	bw := bufio.NewWriterSize(w, records.FileBuffer)
	var buf, tail []byte
	for rows.Next() {
		var row int32
		var outcome, code, field, message string
		if err := rows.Scan(&row, &outcome, &code, &field, &message); err != nil {
			return fmt.Errorf("store result: %w", err)
		}
		tail = normalize.AppendResultCells(tail[:0], code, field, message)
		buf = binary.AppendUvarint(buf[:0], uint64(row))
		buf = binary.AppendUvarint(buf, uint64(len(outcome)))
		buf = binary.AppendUvarint(buf, uint64(len(tail)))
		buf = append(append(buf, outcome...), tail...)
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("store result: spool classified rows: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store result: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("store result: spool classified rows: %w", err)
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
	var no, nt uint64
	if err == nil {
		no, err = binary.ReadUvarint(m.r)
	}
	if err == nil {
		nt, err = binary.ReadUvarint(m.r)
	}
	if err == nil {
		m.cur.outcome, err = readN(m.r, m.cur.outcome, no)
	}
	if err == nil {
		m.cur.tail, err = readN(m.r, m.cur.tail, nt)
	}
	if err != nil {
		m.err, m.have = fmt.Errorf("store result: read spooled classified rows: %w", err), false
		return
	}
	m.cur.row, m.have = int(row), true
}

// readN reads n bytes from r into buf's space.
func readN(r io.Reader, buf []byte, n uint64) ([]byte, error) {
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// block appends to dst the lines of src, one block of staging's lines,
// each as classify decided it. A rejected line classified does not hold
// is an error but in a compared resubmission: every other invalid row is
// in classified.
func (m *merger) block(dst, src []byte) ([]byte, error) {
	const created = "created,"
	const rejected = "rejected,"
	for len(src) > 0 {
		end := lineEnd(src)
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
		if m.have && m.cur.row < row {
			return nil, fmt.Errorf("store result: classified row %d has no staged line", m.cur.row)
		}
		classified := m.have && m.cur.row == row
		rest := line[c2+1:]
		switch {
		case bytes.HasPrefix(rest, []byte(created)) && classified:
			// created,ECHOED,,,: ECHOED with classify's outcome and tail.
			dst = append(dst, line[:c2+1]...)
			dst = append(append(dst, m.cur.outcome...), ',')
			dst = append(dst, rest[len(created):len(rest)-3]...)
			dst = append(append(dst, ','), m.cur.tail...)
		case bytes.HasPrefix(rest, []byte(created)):
			dst = append(dst, line[:c2+1]...)
			dst = append(dst, string(records.OutcomeUnchanged)...)
			dst = append(dst, rest[len(created)-1:]...)
		case bytes.HasPrefix(rest, []byte(rejected)) && (classified || m.compared):
			dst = append(dst, line...)
		default:
			return nil, fmt.Errorf("store result: row %d is neither in classified nor created as staged", row)
		}
		dst = append(dst, '\n')
		if classified {
			if m.advance(); m.err != nil {
				return nil, m.err
			}
		}
	}
	return dst, nil
}

// lineEnd is the index of the line break that ends src's first line, -1
// if none: a line break inside a quoted cell is the cell's.
func lineEnd(src []byte) int {
	quoted := false
	for i, c := range src {
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\n' && !quoted:
			return i
		}
	}
	return -1
}
