package records_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// A streamed upload is recorded exactly as one stored from its spool: the
// same bytes and SHA-256, one envelope; a repeat keeps no bytes of its own;
// a key reuse keeps its bytes for audit; an aborted stream leaves nothing;
// a stream that does not hold the hashed bytes falls back to the spool.
func TestStreamedReceive(t *testing.T) {
	st := pgtest.Store(t)
	ctx := t.Context()
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name string, size int, seed byte) (string, []byte) {
		// Bytes that never repeat: a batch copied from the wrong buffer
		// would not pass for the right one.
		data := make([]byte, size)
		_, _ = rand.NewChaCha8([32]byte{seed}).Read(data)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path, data
	}
	chunksOf := func(id int64) int {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM envelope_chunks WHERE envelope_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// stream sends data in uneven writes, as SFTP packets arrive.
	stream := func(data []byte) *records.Stream {
		s, err := st.StartStream(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); {
			k := min(len(data)-off, 32768+off%1000)
			if err := s.Write(data[off : off+k]); err != nil {
				t.Fatal(err)
			}
			off += k
		}
		return s
	}
	receive := func(name, path string, data []byte, s *records.Stream) records.Envelope {
		sum := sha256.Sum256(data)
		env, err := st.Receive(ctx, records.Incoming{PartnerID: "acme", FileName: name, Source: "sftp", Path: path,
			SHA256: sum[:], Size: int64(len(data)), Stream: s}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(st.EnvelopeBytes(ctx, env.ID))
		if err != nil {
			t.Fatal(err)
		}
		if env.Status != records.StatusRepeat && !bytes.Equal(got, data) {
			t.Fatalf("%s: stored %d bytes, not the %d sent", name, len(got), len(data))
		}
		return env
	}

	// 1. A new file, 9.5 MiB: 9.5 batches of the stream (about 128 chunks
	// each), more than its queue holds, so that batches the copy has
	// used are filled again; the last chunk not full.
	path, data := file("a.csv", 9<<20+1<<19, 1)
	a := receive("a.csv", path, data, stream(data))
	if a.Status != records.StatusReceived {
		t.Fatalf("a.csv: status %s, want received", a.Status)
	}
	if n, want := chunksOf(a.ID), (len(data)+records.ChunkSize-1)/records.ChunkSize; n != want {
		t.Fatalf("a.csv: %d chunks stored, want %d", n, want)
	}
	// 2. The same file again: a repeat, its streamed bytes dropped.
	r := receive("a.csv", path, data, stream(data))
	if r.Status != records.StatusRepeat || r.RepeatOf != a.ID {
		t.Fatalf("a.csv again: status %s replay_of %d, want a repeat of %d", r.Status, r.RepeatOf, a.ID)
	}
	if n := chunksOf(r.ID); n != 0 {
		t.Fatalf("repeat: %d chunks stored, want 0", n)
	}
	// 3. Other bytes under the same name: key reuse, bytes kept for audit.
	path2, data2 := file("a2.csv", 100, 2)
	k := receive("a.csv", path2, data2, stream(data2))
	if k.Status != records.StatusKeyReuse {
		t.Fatalf("other bytes: status %s, want key_reuse", k.Status)
	}
	if n := chunksOf(k.ID); n != 1 {
		t.Fatalf("key reuse: %d chunks stored, want 1", n)
	}
	// 4. An aborted stream leaves no chunk behind, and its slot is free.
	s := stream(data)
	s.Abort()
	var orphans int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM envelope_chunks c WHERE NOT EXISTS (SELECT FROM envelopes e WHERE e.id = c.envelope_id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Fatalf("%d chunks without an envelope after an abort", orphans)
	}
	// 5. A stream missing the tail of what was hashed: stored from the spool.
	path3, data3 := file("c.csv", 2<<20+5, 3)
	c := receive("c.csv", path3, data3, stream(data3[:1<<20]))
	if n, want := chunksOf(c.ID), (len(data3)+records.ChunkSize-1)/records.ChunkSize; n != want {
		t.Fatalf("fallback: %d chunks stored, want %d", n, want)
	}
	// 6. A stream is its partner's: received for another, it is refused,
	// and nothing of it stays.
	if err := st.AddPartner(ctx, records.Partner{ID: "globex"}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data2)
	if _, err := st.Receive(ctx, records.Incoming{PartnerID: "globex", FileName: "d.csv", Source: "sftp", Path: path2,
		SHA256: sum[:], Size: int64(len(data2)), Stream: stream(data2)}, nil); err == nil || !strings.Contains(err.Error(), `streamed for partner "acme", not "globex"`) {
		t.Fatalf("acme's stream received for globex: %v, want a refusal naming both", err)
	}
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM envelope_chunks c WHERE NOT EXISTS (SELECT FROM envelopes e WHERE e.id = c.envelope_id)`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("%d chunks without an envelope after a refused stream (%v)", orphans, err)
	}
	// A stream never waits for a connection: it is refused when the slots
	// (a share of the pool) are taken.
	var streams []*records.Stream
	for {
		s, err := st.StartStream(ctx, "acme")
		if errors.Is(err, records.ErrNoStream) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
		if len(streams) > 100 {
			t.Fatal("streams never refused: they could take every connection")
		}
	}
	if len(streams) == 0 {
		t.Fatal("no stream could start")
	}
	for _, s := range streams {
		s.Abort()
	}
	s, err := st.StartStream(ctx, "acme")
	if err != nil {
		t.Fatalf("after the aborts, a stream should start: %v", err)
	}
	s.Abort()
}
