package records_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// An envelope's bytes read back the same, by the download reader
// (EnvelopeBytes) and by processing (the job's body), stored as rows of
// ChunkSize bytes in the table's pages as they came, one a page; a missing
// chunk, in the middle or at the end, is an error, never a shorter file; an
// envelope with chunks is neither deleted nor renumbered, and envelopes are
// not truncated without their chunks.
func TestEnvelopeBytes(t *testing.T) {
	st := pgtest.Store(t)
	ctx := t.Context()
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	// Half payroll-like CSV (would compress), half random bytes (would not),
	// not a whole number of chunks.
	var b bytes.Buffer
	b.WriteString("employee_ref,pay_period,component,amount,currency\n")
	r := rand.New(rand.NewChaCha8([32]byte{1}))
	for e := 1; b.Len() < 3<<19; e++ {
		for _, c := range []string{"BASE", "OVERTIME", "BONUS", "HEALTH_INS"} {
			fmt.Fprintf(&b, "E%07d,2026-11,%s,%d.%02d,EUR\n", e, c, r.IntN(1e4), r.IntN(100))
		}
	}
	noise := make([]byte, 3<<19+12345)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	b.Write(noise)
	data := b.Bytes()

	var n int
	count := func(q string, args ...any) int {
		t.Helper()
		if err := st.Pool().QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	var toast string
	if err := st.Pool().QueryRow(ctx, `SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'envelope_chunks'::regclass`).Scan(&toast); err != nil {
		t.Fatal(err)
	}
	receive := func(name string) records.Envelope {
		t.Helper()
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		env, err := st.Receive(ctx, records.Incoming{PartnerID: "acme", FileName: name, Source: "cli", Path: path,
			SHA256: sum[:], Size: int64(len(data))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	// check reads env's bytes both ways.
	check := func(what string, env records.Envelope) {
		t.Helper()
		got, err := io.ReadAll(st.EnvelopeBytes(ctx, env.ID))
		if err != nil {
			t.Fatalf("%s: EnvelopeBytes: %v", what, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: EnvelopeBytes read %d bytes, not the %d stored", what, len(got), len(data))
		}
		job, err := apply.New(st, apply.Options{}).Open(ctx, env.ID, false)
		if err != nil {
			t.Fatalf("%s: open for processing: %v", what, err)
		}
		body, err := io.ReadAll(job.Body)
		job.Close(ctx)
		if err != nil {
			t.Fatalf("%s: process: %v", what, err)
		}
		if !bytes.Equal(body, data) {
			t.Fatalf("%s: processing read %d bytes, not the %d stored", what, len(body), len(data))
		}
	}

	// The layout: a row a chunk, one a page, nothing TOASTed, nothing
	// compressed.
	a := receive("a.csv")
	chunks := (len(data) + records.ChunkSize - 1) / records.ChunkSize
	if got := count(`SELECT count(*) FROM envelope_chunks WHERE envelope_id = $1`, a.ID); got != chunks {
		t.Fatalf("%d chunks stored, want %d", got, chunks)
	}
	if got := count(`SELECT max(octet_length(data)) FROM envelope_chunks WHERE envelope_id = $1`, a.ID); got != records.ChunkSize {
		t.Fatalf("largest chunk %d bytes, want %d", got, records.ChunkSize)
	}
	if got := count(`SELECT count(*) FROM ` + toast); got != 0 {
		t.Fatalf("%d TOAST rows: chunks were moved out of their rows", got)
	}
	if got := count(`SELECT count(*) FROM envelope_chunks WHERE envelope_id = $1 AND pg_column_compression(data) IS NOT NULL`, a.ID); got != 0 {
		t.Fatalf("%d chunks compressed in their rows, want none", got)
	}
	if got := count(`SELECT count(DISTINCT (ctid::text::point)[0]) FROM envelope_chunks WHERE envelope_id = $1`, a.ID); got != chunks {
		t.Fatalf("%d chunks take %d pages, want one a page", chunks, got)
	}
	// The reference to the envelope, kept without a foreign key: with its
	// submission (a foreign key, checked first) out of the way, the chunks
	// still hold the envelope.
	for _, q := range []string{`DELETE FROM envelopes WHERE id = $1`, `UPDATE envelopes SET id = id + 1000000 WHERE id = $1`} {
		err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `DELETE FROM submissions WHERE envelope_id = $1`, a.ID); err != nil {
				t.Fatal(err)
			}
			_, err := tx.Exec(ctx, q, a.ID)
			return err
		})
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != pgerrcode.ForeignKeyViolation || !strings.Contains(pe.Message, `"envelope_chunks"`) {
			t.Fatalf("%s of an envelope with chunks: %v, want foreign_key_violation naming envelope_chunks", q, err)
		}
	}
	check("the chunks' layout", a)

	// A chunk missing in the middle: both readers say so.
	gap := receive("gap.csv")
	if _, err := st.Pool().Exec(ctx, `DELETE FROM envelope_chunks WHERE envelope_id = $1 AND n = 200`, gap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(st.EnvelopeBytes(ctx, gap.ID)); err == nil || !strings.Contains(err.Error(), "chunk 200 is missing") {
		t.Fatalf("EnvelopeBytes with chunk 200 missing: %v, want an error naming it", err)
	}
	if _, err := apply.New(st, apply.Options{}).Open(ctx, gap.ID, false); err == nil || !strings.Contains(err.Error(), "chunk 200 is missing") {
		t.Fatalf("processing with chunk 200 missing: %v, want an error naming it", err)
	}

	// Chunks missing at the end, or every chunk: no gap to see, so both
	// readers compare what they read with the size received.
	tail := receive("tail.csv")
	for _, c := range []struct{ what, del string }{
		{"the last chunk missing", `DELETE FROM envelope_chunks WHERE envelope_id = $1 AND n = (SELECT max(n) FROM envelope_chunks WHERE envelope_id = $1)`},
		{"every chunk missing", `DELETE FROM envelope_chunks WHERE envelope_id = $1`},
	} {
		if _, err := st.Pool().Exec(ctx, c.del, tail.ID); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("of the %d received: its bytes are incomplete", len(data))
		if _, err := io.ReadAll(st.EnvelopeBytes(ctx, tail.ID)); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("EnvelopeBytes with %s: %v, want an error saying %q", c.what, err, want)
		}
		if _, err := apply.New(st, apply.Options{}).Open(ctx, tail.ID, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("processing with %s: %v, want an error saying %q", c.what, err, want)
		}
	}

	// TRUNCATE … CASCADE empties the tables with a foreign key to
	// envelopes, which envelope_chunks is not: refused while chunks remain;
	// both in one statement pass.
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `TRUNCATE envelopes CASCADE`)
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgerrcode.ForeignKeyViolation || !strings.Contains(pe.Message, `"envelope_chunks"`) {
		t.Fatalf("TRUNCATE envelopes CASCADE with chunks stored: %v, want foreign_key_violation naming envelope_chunks", err)
	}
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `TRUNCATE envelopes, envelope_chunks CASCADE`); err != nil {
		t.Fatalf("TRUNCATE envelopes, envelope_chunks CASCADE: %v", err)
	}
}
