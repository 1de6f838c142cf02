package records

import (
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
	sqlEnvelopeChunk = query("EnvelopeChunk")
)

const chunkSize = 1 << 20

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
	src := &chunkSource{id: id, r: f}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"envelope_chunks"}, []string{"envelope_id", "n", "data"}, src); err != nil {
		return fmt.Errorf("store envelope bytes: %w", err)
	}
	if src.total != size {
		return fmt.Errorf("store envelope bytes: the file holds %d bytes, %d were hashed", src.total, size)
	}
	return nil
}

type chunkSource struct {
	id    int64
	r     io.Reader
	n     int32
	buf   []byte
	err   error
	total int64
}

func (c *chunkSource) Next() bool {
	c.buf = make([]byte, chunkSize)
	k, err := io.ReadFull(c.r, c.buf)
	c.buf = c.buf[:k]
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

func (c *chunkSource) Values() ([]any, error) { return []any{c.id, c.n - 1, c.buf}, nil }
func (c *chunkSource) Err() error             { return c.err }

// EnvelopeBytes returns a reader over the original bytes of an envelope,
// fetched a chunk at a time on its own connection (for audit and
// downloads; processing copies the bytes through its own transaction).
func (s *Store) EnvelopeBytes(ctx context.Context, id int64) io.Reader {
	return &chunkReader{ctx: ctx, s: s, id: id}
}

type chunkReader struct {
	ctx  context.Context
	s    *Store
	id   int64
	n    int32
	buf  []byte
	done bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.done {
			return 0, io.EOF
		}
		var data []byte
		err := r.s.pool.QueryRow(r.ctx, sqlEnvelopeChunk, r.id, r.n).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			r.done = true
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read bytes of envelope %d: %w", r.id, err)
		}
		r.buf = data
		r.n++
	}
	k := copy(p, r.buf)
	r.buf = r.buf[k:]
	return k, nil
}
