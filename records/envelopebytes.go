package records

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"
)

// Statements of envelopebytes.sql.
var (
	sqlEnvelopeChunks     = query("EnvelopeChunks")
	sqlEnvelopeChunksFrom = query("EnvelopeChunksFrom")
	sqlEnvelopeStoredSize = query("EnvelopeStoredSize")
)

// An envelope's bytes are the rows of envelope_chunks numbered 0, 1, 2, …
// in order. A row holds chunkSize bytes (the last one fewer) as they came,
// in the table's own pages (STORAGE PLAIN: never compressed, never moved out
// of line): one heap tuple, one primary-key entry and one page a chunk, the
// most a page holds. A larger chunk would be TOASTed into ~2 KB pieces, each
// with an index entry of its own, which costs PostgreSQL about twice the CPU
// a byte. Readers take chunks of any size, by their numbers.
const chunkSize = 8000

// readBatch is about how many bytes a reader of envelope bytes takes from
// the database a query.
const readBatch = 1 << 20

// FileBuffer is the buffer of a local file's reads and writes: the bytes
// stored from a received file, the spool they are read back into, the
// result lines. A buffer of readBatch (1 MiB) for each of them would be
// ~2.3 MB of garbage a file, whatever its size, that the garbage collector
// and the OS's page faults pay for; at 64 KiB a 60 MB file takes ~900
// write calls instead of ~60, a few ms.
const FileBuffer = 64 << 10

func hashFile(path string) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("open received file: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, 0, fmt.Errorf("hash received file: %w", err)
	}
	return h.Sum(nil), n, nil
}

// storeChunks streams the file into envelope_chunks with COPY, a chunk at a
// time; the file must hold exactly size bytes (the size that was hashed).
func storeChunks(ctx context.Context, tx pgx.Tx, id int64, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open received file: %w", err)
	}
	defer f.Close()
	return copyChunks(ctx, tx, pgx.Identifier{"envelope_chunks"}, []string{"envelope_id", "n", "data"}, id, 0, f, size)
}

// copyChunks copies the size bytes of r into table as chunks numbered from
// first on, with COPY; r must hold exactly size bytes.
func copyChunks(ctx context.Context, tx pgx.Tx, table pgx.Identifier, cols []string, id int64, first int32, r io.Reader, size int64) error {
	src := &chunkSource{id: id, n: first, r: bufio.NewReaderSize(r, FileBuffer), buf: make([]byte, chunkSize)}
	if _, err := tx.CopyFrom(ctx, table, cols, src); err != nil {
		return fmt.Errorf("store %s bytes: %w", table[0], err)
	}
	if src.total != size {
		return fmt.Errorf("store %s bytes: the file holds %d bytes, %d were hashed", table[0], src.total, size)
	}
	return nil
}

// chunkSource reads the chunks into one buffer: CopyFrom encodes a row's
// values before it asks for the next row.
type chunkSource struct {
	id    int64
	r     io.Reader
	n     int32
	buf   []byte
	cur   []byte
	err   error
	total int64
}

func (c *chunkSource) Next() bool {
	k, err := io.ReadFull(c.r, c.buf)
	c.cur = c.buf[:k]
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if k == 0 {
			return false
		}
	} else if err != nil {
		c.err = err
		return false
	}
	c.n++
	c.total += int64(k)
	return true
}

func (c *chunkSource) Values() ([]any, error) { return []any{c.id, c.n - 1, c.cur}, nil }
func (c *chunkSource) Err() error             { return c.err }

// querier is a transaction or the pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// copyEnvelopeBytes writes the bytes of envelope id to w, its chunks in
// order, with one query through q (rows are read as they come: one chunk
// in memory at a time).
func copyEnvelopeBytes(ctx context.Context, q querier, id int64, w io.Writer) error {
	return copyChunkRows(ctx, q, sqlEnvelopeChunks, "envelope", id, w)
}

// copyChunkRows writes to w the chunks that sql (numbered rows n, data of
// the what called id, in order) returns.
func copyChunkRows(ctx context.Context, q querier, sql, what string, id int64, w io.Writer) error {
	rows, err := q.Query(ctx, sql, id)
	if err != nil {
		return fmt.Errorf("read bytes of %s %d: %w", what, id, err)
	}
	defer rows.Close()
	var want int32
	for rows.Next() {
		data, err := chunkRowOf(rows, what, id, want)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("read bytes of %s %d: %w", what, id, err)
		}
		want++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read bytes of %s %d: %w", what, id, err)
	}
	return nil
}

// writeChunks writes the bytes a query through q gives in its first column,
// row after row as they come (stored chunks, in order), to w; what names
// them in errors ("result of envelope 7").
func writeChunks(ctx context.Context, q querier, w io.Writer, what, sql string, args ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if _, err := w.Write(rows.RawValues()[0]); err != nil {
			return fmt.Errorf("write %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}

// chunkRow checks that the current row (n, data) is chunk want and returns
// its bytes (valid until the next row is read).
func chunkRow(rows pgx.Rows, id int64, want int32) ([]byte, error) {
	return chunkRowOf(rows, "envelope", id, want)
}

func chunkRowOf(rows pgx.Rows, what string, id int64, want int32) ([]byte, error) {
	var n int32
	if err := rows.Scan(&n, nil); err != nil {
		return nil, fmt.Errorf("read bytes of %s %d: %w", what, id, err)
	}
	if n != want {
		return nil, fmt.Errorf("read bytes of %s %d: chunk %d is missing (the next stored is %d): its bytes are incomplete", what, id, want, n)
	}
	return rows.RawValues()[1], nil
}

// checkStoredSize refuses an envelope's bytes read back whole (no gap
// between chunks) that still do not come to the size received: chunks
// missing at the end would otherwise read as a shorter, valid file.
func checkStoredSize(read, received int64) error {
	if read != received {
		return fmt.Errorf("its chunks hold %d bytes of the %d received: its bytes are incomplete", read, received)
	}
	return nil
}

// EnvelopeBytes returns a reader over the original bytes of an envelope,
// fetched about readBatch bytes a query on connections of the pool, for a
// reader outside processing (which copies them through its own
// transaction, SpoolEnvelope). Like that copy, it fails when the chunks do
// not add up to the envelope's size; a repeat or an incomplete upload,
// which keep no bytes of their own, reads as empty.
func (s *Store) EnvelopeBytes(ctx context.Context, id int64) io.Reader {
	return &chunkReader{ctx: ctx, s: s, id: id, per: 1}
}

type chunkReader struct {
	ctx  context.Context
	s    *Store
	id   int64
	next int32  // the number of the next chunk to fetch
	read int64  // bytes fetched so far
	per  int    // chunks a query: 1 until the first chunk's size is known
	buf  []byte // what is left of the last fetch
	mem  []byte // the memory buf is taken from
	done bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.done {
			return 0, io.EOF
		}
		if err := r.fetch(); err != nil {
			return 0, err
		}
	}
	k := copy(p, r.buf)
	r.buf = r.buf[k:]
	return k, nil
}

// fetch reads the next r.per chunks into r.buf.
func (r *chunkReader) fetch() error {
	rows, err := r.s.pool.Query(r.ctx, sqlEnvelopeChunksFrom, r.id, r.next, r.per)
	if err != nil {
		return fmt.Errorf("read bytes of envelope %d: %w", r.id, err)
	}
	defer rows.Close()
	got, first := 0, 0
	r.mem = r.mem[:0]
	for rows.Next() {
		data, err := chunkRow(rows, r.id, r.next)
		if err != nil {
			return err
		}
		if got == 0 {
			first = len(data)
		}
		r.mem = append(r.mem, data...)
		r.next++
		got++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read bytes of envelope %d: %w", r.id, err)
	}
	r.buf = r.mem
	r.read += int64(len(r.mem))
	if got < r.per {
		r.done = true
		var size int64
		if err := r.s.pool.QueryRow(r.ctx, sqlEnvelopeStoredSize, r.id, []string{StatusRepeat, StatusIncomplete}).Scan(&size); err != nil {
			return fmt.Errorf("read bytes of envelope %d: %w", r.id, err)
		}
		if err := checkStoredSize(r.read, size); err != nil {
			return fmt.Errorf("read bytes of envelope %d: %w", r.id, err)
		}
	}
	if first > 0 {
		r.per = max(1, readBatch/first)
	}
	return nil
}
