package records

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A stream hands the bytes to its COPY in batches of streamBatch bytes
// (whole chunks), and holds at most streamQueue full batches for the
// database while the upload goes on. A batch the COPY has encoded is filled
// again, so a stream allocates at most streamQueue+2 batches, about 6 MB,
// however long the file.
const (
	streamBatch = 128 * chunkSize
	streamQueue = 4
)

// Stream copies a file's bytes into envelope_chunks while they arrive, in
// the transaction that Receive (with Incoming.Stream) then completes: the
// envelope row, its submission key and outcome are written in that same
// transaction, so nothing of the file is visible before the outcome, and an
// aborted stream leaves no trace. The envelope's id is taken at the start
// (ReserveEnvelopeID); Receive inserts its row under it.
//
// Write is not safe for concurrent use. A stream that fails (database
// error) says so on Write; the caller then drops it (Abort) and stores the
// file the ordinary way at the close.
type Stream struct {
	s       *Store
	conn    *pgxpool.Conn
	tx      pgx.Tx
	id      int64
	partner string
	cancel  context.CancelFunc
	release func()

	batches   chan []byte
	free      chan []byte // batches the copy has used, to be filled again
	buf       []byte
	total     int64
	copying   bool
	committed bool
	done      chan struct{} // closed when the COPY has ended
	err       error         // the COPY's error, set before done closes
	once      sync.Once
}

// ErrNoStream means no stream can be started now (all the connections
// streams may hold are in use): store the file at the close instead.
var ErrNoStream = errors.New("no database connection free for streaming an upload")

// StartStream begins a stream of a file of partner, or returns ErrNoStream
// when the streams already running hold their share of the pool. ctx bounds
// the whole stream (it ends with Receive or Abort).
func (s *Store) StartStream(ctx context.Context, partner string) (*Stream, error) {
	select {
	case s.streams <- struct{}{}:
	default:
		return nil, ErrNoStream
	}
	ctx, cancel := context.WithCancel(ctx)
	st := &Stream{s: s, partner: partner, cancel: cancel, release: func() { <-s.streams },
		batches: make(chan []byte, streamQueue), free: make(chan []byte, streamQueue+1), done: make(chan struct{})}
	fail := func(err error) (*Stream, error) {
		st.Abort()
		return nil, err
	}
	var err error
	if st.conn, err = s.pool.Acquire(ctx); err != nil {
		return fail(fmt.Errorf("stream upload: connect: %w", err))
	}
	if st.tx, err = st.conn.Begin(ctx); err != nil {
		return fail(fmt.Errorf("stream upload: begin: %w", err))
	}
	if err := st.tx.QueryRow(ctx, sqlReserveEnvelopeID).Scan(&st.id); err != nil {
		return fail(fmt.Errorf("stream upload: reserve the envelope: %w", err))
	}
	st.copying = true
	go func() {
		defer close(st.done)
		src := &streamSource{id: st.id, batches: st.batches, free: st.free, ctx: ctx}
		_, err := st.tx.CopyFrom(ctx, pgx.Identifier{"envelope_chunks"}, []string{"envelope_id", "n", "data"}, src)
		if err != nil {
			st.err = fmt.Errorf("stream upload bytes: %w", err)
		}
	}()
	return st, nil
}

// Write adds p (copied) to the stream; the bytes must follow the ones
// written before, from byte 0 of the file.
func (st *Stream) Write(p []byte) error {
	for len(p) > 0 {
		if st.buf == nil {
			select {
			case b := <-st.free:
				st.buf = b[:0]
			default:
				st.buf = make([]byte, 0, streamBatch)
			}
		}
		k := min(len(p), streamBatch-len(st.buf))
		st.buf = append(st.buf, p[:k]...)
		p = p[k:]
		st.total += int64(k)
		if len(st.buf) == streamBatch {
			if err := st.send(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (st *Stream) send() error {
	select {
	case st.batches <- st.buf:
		st.buf = nil
		return nil
	case <-st.done:
		return st.copyErr()
	}
}

func (st *Stream) copyErr() error {
	if st.err != nil {
		return st.err
	}
	return errors.New("stream upload bytes: the copy ended early")
}

// finish sends the last chunk, ends the COPY and checks that it holds size
// bytes; the stream's transaction is then ready for the envelope.
func (st *Stream) finish(size int64) error {
	// How long the close waits for the database to catch up with the
	// upload (the part of the close this stream did not hide).
	defer func(t0 time.Time) {
		st.s.log.Debug("upload stream finished", "bytes", st.total, "wait", time.Since(t0))
	}(time.Now())
	if len(st.buf) > 0 {
		if err := st.send(); err != nil {
			return err
		}
	}
	st.once.Do(func() { close(st.batches) })
	<-st.done
	if st.err != nil {
		return st.err
	}
	if st.total != size {
		return fmt.Errorf("store envelope bytes: %d bytes were streamed, %d were hashed", st.total, size)
	}
	return nil
}

// Abort drops the stream and everything it copied (nothing was committed).
// Safe to call more than once, and after Receive.
func (st *Stream) Abort() {
	if st.cancel == nil {
		return
	}
	st.cancel()
	if st.copying {
		st.once.Do(func() { close(st.batches) })
		<-st.done
	}
	if st.tx != nil {
		_ = st.tx.Rollback(context.Background())
	}
	if st.conn != nil {
		st.conn.Release()
	}
	st.release()
	st.cancel = nil
}

// streamSource feeds the batches to COPY as they come, a chunk a row.
type streamSource struct {
	ctx     context.Context
	id      int64
	batches <-chan []byte
	free    chan<- []byte
	batch   []byte // the batch being copied
	rest    []byte // what is left of it
	n       int32
	cur     []byte
	err     error
}

func (c *streamSource) Next() bool {
	for len(c.rest) == 0 {
		select {
		case b, ok := <-c.batches:
			if !ok {
				return false
			}
			if c.batch != nil {
				// pgx has encoded the rows of the batch before.
				select {
				case c.free <- c.batch:
				default:
				}
			}
			c.batch, c.rest = b, b
		case <-c.ctx.Done():
			c.err = c.ctx.Err()
			return false
		}
	}
	k := min(len(c.rest), chunkSize)
	c.cur, c.rest = c.rest[:k], c.rest[k:]
	c.n++
	return true
}

func (c *streamSource) Values() ([]any, error) { return []any{c.id, c.n - 1, c.cur}, nil }
func (c *streamSource) Err() error             { return c.err }

// commit runs record in the stream's transaction (the copy finished) and
// commits it.
func (st *Stream) commit(ctx context.Context, record func(pgx.Tx) error) error {
	if err := record(st.tx); err != nil {
		return err
	}
	if err := st.s.commitWithin(ctx, st.tx, "record envelope"); err != nil {
		return err
	}
	st.committed = true
	return nil
}

// Committed tells whether Receive recorded the envelope with this stream's
// bytes (false: it stored them from the spool, or failed).
func (st *Stream) Committed() bool { return st.committed }
