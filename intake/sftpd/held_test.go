package sftpd

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"os"
	"testing"
)

// Writes that arrive ahead of the bytes before them are held until the gap
// closes: what is counted as held is what is held, a held write's buffer
// serves a later one, and the buffers kept for that stay few and small
// however a client sizes its writes. The bytes hashed are the file's.
func TestHeldWritesMemoryStaysBounded(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "spool-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fs := &partnerFS{srv: &Server{cfg: Config{Checkpoint: -1}}, log: slog.New(slog.DiscardHandler)}
	u := &upload{fs: fs, name: "held.bin"}
	p := &pending{f: f, h: sha256.New(), held: map[int64]heldWrite{}, writer: u}
	u.p = p
	write := func(b []byte, off int64) {
		t.Helper()
		if fr := p.write(u, b, off); fr != nil {
			t.Fatalf("write of %d bytes at %d: %v", len(b), off, fr.err)
		}
	}

	var file []byte
	// Each round: a block one byte ahead of the hashed end, larger than
	// any before it (no kept buffer fits it), then the byte that closes
	// the gap.
	for i := 1; i <= 300; i++ {
		off := p.hashed
		blk := bytes.Repeat([]byte{byte(i)}, 4000+i)
		write(blk, off+1)
		if p.heldMem != int64(len(blk)) {
			t.Fatalf("round %d: %d bytes counted as held, %d are", i, p.heldMem, len(blk))
		}
		write([]byte{byte(i + 1)}, off)
		file = append(append(file, byte(i+1)), blk...)
		if p.heldMem != 0 || len(p.held) != 0 {
			t.Fatalf("round %d: %d bytes (%d writes) still counted as held after the gap closed", i, p.heldMem, len(p.held))
		}
		kept := 0
		for _, b := range p.spare {
			kept += cap(b)
		}
		if len(p.spare) > maxSpareBuffers || kept > maxHeldInMemory {
			t.Fatalf("round %d: %d buffers of %d bytes kept for reuse, want at most %d within %d bytes",
				i, len(p.spare), kept, maxSpareBuffers, maxHeldInMemory)
		}
	}

	// A longer write at a held write's offset takes its place, counted once.
	off := p.hashed
	write(bytes.Repeat([]byte{7}, 10), off+5)
	write(bytes.Repeat([]byte{7}, 20), off+5)
	if p.heldMem != 20 {
		t.Fatalf("after a held write of 10 bytes replaced by one of 20: %d bytes counted as held", p.heldMem)
	}
	// Smaller blocks now reuse the kept buffers instead of new ones.
	kept := len(p.spare)
	write(bytes.Repeat([]byte{9}, 5), off)
	file = append(append(file, bytes.Repeat([]byte{9}, 5)...), bytes.Repeat([]byte{7}, 20)...)
	if p.heldMem != 0 {
		t.Fatalf("%d bytes counted as held after the last gap closed", p.heldMem)
	}
	off = p.hashed
	write(bytes.Repeat([]byte{3}, 100), off+100)
	if len(p.spare) >= kept+1 {
		t.Fatalf("a held write of 100 bytes took a new buffer: %d kept before, %d after", kept, len(p.spare))
	}
	write(bytes.Repeat([]byte{4}, 100), off)
	file = append(append(file, bytes.Repeat([]byte{4}, 100)...), bytes.Repeat([]byte{3}, 100)...)

	if want := sha256.Sum256(file); !bytes.Equal(p.h.Sum(nil), want[:]) || p.hashed != int64(len(file)) {
		t.Fatalf("hashed %d bytes to %x, want %d bytes hashing to %x", p.hashed, p.h.Sum(nil), len(file), want)
	}
}
