package intake

import (
	"errors"
	"io"
	"runtime"
	"sync"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// rowSource adapts a normalize.Reader to the store's staging. A parallel
// one reads the file's rows in order in one goroutine
// (normalize.Reader.Read: the CSV decoding) in batches of rowBatchRows,
// and rowWorkers goroutines normalise each batch (Reader.Finish, Stage),
// so that a file's rows are normalised on every core while the database
// waits for them; Next hands them out in file order. At most a few
// batches are in flight, so memory stays flat whatever the file's size.
// The goroutines start at the first Next and stop at Close (or once the
// file is read). A read is parallel when apply.ReadOptions ask for it:
// the store does for the reads the database waits for. While whole rows
// are copied into the database, its backend needs the other core: a
// parallel read would take it from the backend and make nothing faster.
//
// With KeysOnly, a valid row carries its natural key alone (no content
// hash, no formatted numbers), which is all a first read for
// apply.Plan.Reread needs. With Only, the rows it does not select are
// read as CSV (to know where the next row starts) and dropped.
type rowSource struct {
	r        *normalize.Reader
	keysOnly bool
	parallel bool
	only     func(row int) bool
	batches  chan *rowBatch // batches read before, for this read to fill again (nil: none kept)

	started bool
	closed  bool
	work    chan *rowBatch // to the workers
	order   chan *rowBatch // the same batches in file order, to Next
	stop    chan struct{}
	wg      sync.WaitGroup
	cur     *rowBatch
	next    int
}

// rowBatch is rows of the file: read (pend), then staged (rows); err is
// Read's error after the last of them (io.EOF at the end of the file).
type rowBatch struct {
	pend []normalize.Pending
	rows []records.StagedRow
	err  error
	done chan struct{} // closed once rows is filled
}

const rowBatchRows = 512

var errRowsClosed = errors.New("intake: rows read after Close")

func newRowSource(r *normalize.Reader, o apply.ReadOptions, batches chan *rowBatch) *rowSource {
	return &rowSource{r: r, keysOnly: o.KeysOnly, parallel: o.Parallel, only: o.Only, batches: batches}
}

// keptBatches is how many batches an Intake keeps for its next reads: as
// many as one parallel read has in flight, ~2.5 MB.
func keptBatches() int { return rowWorkers()*2 + 3 }

// newBatch takes an empty batch, one kept if there is one. A batch is 512
// rows of ~700 bytes (360 KB); allocated anew for every read, batches
// would be about a third of what a 10,000-row file allocates, and their
// garbage makes the collector run and the runtime hand pages back to the
// OS and fault them in again, on the cores the database needs.
func (s *rowSource) newBatch() *rowBatch {
	select {
	case b := <-s.batches:
		b.done = make(chan struct{})
		return b
	default:
		return &rowBatch{pend: make([]normalize.Pending, 0, rowBatchRows), rows: make([]records.StagedRow, 0, rowBatchRows),
			done: make(chan struct{})}
	}
}

// putBatch keeps a batch whose rows were all handed out, if there is room.
func (s *rowSource) putBatch(b *rowBatch) {
	clear(b.pend)
	clear(b.rows)
	b.pend, b.rows, b.err = b.pend[:0], b.rows[:0], nil
	select {
	case s.batches <- b:
	default:
	}
}

// readRow takes the next row the source yields from the file.
func (s *rowSource) readRow() (normalize.Pending, error) {
	for {
		p, err := s.r.Read()
		if err != nil || s.only == nil || s.only(p.Index()) {
			return p, err
		}
	}
}

// rowWorkers is how many goroutines normalise a file's rows.
func rowWorkers() int { return max(1, min(runtime.GOMAXPROCS(0), 4)) }

func (s *rowSource) start() {
	s.started = true
	n := rowWorkers()
	s.work = make(chan *rowBatch, n)
	s.order = make(chan *rowBatch, n+2)
	s.stop = make(chan struct{})
	s.wg.Add(1 + n)
	go s.read()
	for range n {
		go s.stage()
	}
}

// read is the goroutine that reads the file's rows, in order.
func (s *rowSource) read() {
	defer s.wg.Done()
	defer close(s.work)
	defer close(s.order)
	for {
		b := s.newBatch()
		for len(b.pend) < rowBatchRows {
			p, err := s.readRow()
			if err != nil {
				b.err = err
				break
			}
			b.pend = append(b.pend, p)
		}
		last := b.err != nil // b is Next's once a worker has it: not read after
		select {
		case s.order <- b:
		case <-s.stop:
			return
		}
		select {
		case s.work <- b:
		case <-s.stop:
			return
		}
		if last {
			return
		}
	}
}

// stage is a goroutine that normalises and stages batches.
func (s *rowSource) stage() {
	defer s.wg.Done()
	for b := range s.work {
		b.rows = b.rows[:len(b.pend)]
		for i, p := range b.pend {
			b.rows[i] = s.staged(s.r.Finish(p))
		}
		close(b.done)
	}
}

func (s *rowSource) staged(row normalize.Row) records.StagedRow {
	if s.keysOnly && row.Err == nil {
		st := records.StagedRow{Row: row.Index, Line: row.Line,
			EmployeeRef: row.Record.EmployeeRef, PayPeriod: row.Record.PayPeriod, Component: row.Record.Component}
		if row.Held != nil { // held all the same (records.StagedRow.HeldCode)
			st.Field = row.Held.Field
		}
		return st
	}
	return apply.Stage(row)
}

// Next returns the next row, io.EOF after the last, or the error that
// rejects the file whole (a *normalize.ParseError), again and again.
func (s *rowSource) Next() (records.StagedRow, error) {
	if s.closed {
		return records.StagedRow{}, errRowsClosed
	}
	if !s.parallel {
		p, err := s.readRow()
		if err != nil {
			return records.StagedRow{}, endOfRows(err)
		}
		return s.staged(s.r.Finish(p)), nil
	}
	if !s.started {
		s.start()
	}
	for {
		if s.cur != nil {
			if s.next < len(s.cur.rows) {
				s.next++
				return s.cur.rows[s.next-1], nil
			}
			if s.cur.err != nil {
				return records.StagedRow{}, endOfRows(s.cur.err)
			}
		}
		b, ok := <-s.order
		if !ok {
			return records.StagedRow{}, errRowsClosed
		}
		<-b.done
		if s.cur != nil {
			s.putBatch(s.cur)
		}
		s.cur, s.next = b, 0
	}
}

// endOfRows is the error Next returns for the Reader's err: io.EOF
// itself at the end of the file, as apply.RowSource promises, else err.
func endOfRows(err error) error {
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	return err
}

// Close stops the goroutines and waits for them: the file is not read
// once Close returns.
func (s *rowSource) Close() error {
	if s.started {
		select {
		case <-s.stop:
		default:
			close(s.stop)
		}
		s.wg.Wait()
	}
	if s.cur != nil {
		s.putBatch(s.cur) // the goroutines are done with it
	}
	s.closed, s.cur = true, nil
	return nil
}
