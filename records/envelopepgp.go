package records

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/payintake/payintake/normalize"
)

// Statements of envelopepgp.sql.
var (
	sqlInsertEnvelopePGP  = query("InsertEnvelopePGP")
	sqlEnvelopePGP        = query("EnvelopePGP")
	sqlAddSealedResult    = query("AddSealedResult")
	sqlSealedResultChunks = query("SealedResultChunks")
	sqlSealedResult       = query("SealedResult")
	sqlReviewsToSeal      = query("ReviewsToSeal")
)

// EnvelopePGP is what an OpenPGP upload was, decided when it was received
// (intake decrypts and verifies it then, to know its plaintext's hash):
// the keys, and either the plaintext's hash and size or the refusal.
type EnvelopePGP struct {
	Armored       bool   `json:"armored"`
	Encrypted     bool   `json:"encrypted"`
	Signed        bool   `json:"signed"`
	DecryptedWith string `json:"decrypted_with,omitempty"` // platform key fingerprint
	Signer        string `json:"signer,omitempty"`         // partner key fingerprint, the signature verified
	PlainSHA256   []byte `json:"plaintext_sha256,omitempty"`
	PlainSize     int64  `json:"plaintext_size"`
	// Refusal is why the file was refused as a whole (nil: it was read);
	// its result is that refusal, nothing else is done with the file.
	Refusal *normalize.ParseError `json:"-"`
	// SealResults: the file's results go back encrypted to the partner and
	// signed by the platform (NAME.result.csv.pgp).
	SealResults bool `json:"seal_results"`
}

func insertEnvelopePGP(ctx context.Context, tx pgx.Tx, id int64, p *EnvelopePGP) error {
	var code, msg string
	if p.Refusal != nil {
		code, msg = string(p.Refusal.Code()), p.Refusal.Message
	}
	_, err := tx.Exec(ctx, sqlInsertEnvelopePGP, id, p.Armored, p.Encrypted, p.Signed, p.DecryptedWith, p.Signer,
		p.PlainSHA256, p.PlainSize, code, msg, p.SealResults)
	if err != nil {
		return fmt.Errorf("record what the OpenPGP file was: %w", err)
	}
	return nil
}

// EnvelopePGP reads what an envelope's OpenPGP file was; ok is false for a
// file that came plain to a partner without OpenPGP.
func (s *Store) EnvelopePGP(ctx context.Context, id int64) (p EnvelopePGP, ok bool, err error) {
	var code, msg string
	err = s.pool.QueryRow(ctx, sqlEnvelopePGP, id).Scan(&p.Armored, &p.Encrypted, &p.Signed, &p.DecryptedWith, &p.Signer,
		&p.PlainSHA256, &p.PlainSize, &code, &msg, &p.SealResults)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("read the OpenPGP record of envelope %d: %w", id, err)
	}
	if code != "" {
		p.Refusal = &normalize.ParseError{Err: normalize.Code(code), Message: msg}
	}
	return p, true, nil
}

// Sealer encrypts a result for its partner: Seal returns a writer whose
// bytes are encrypted to Recipient and signed by Signer (fingerprints),
// written to dst; name is the plain file's name. Package pgp does the work;
// the store only keeps what it wrote.
type Sealer struct {
	Recipient, Signer string
	Seal              func(dst io.Writer, name string) (io.WriteCloser, error)
}

// Kinds of sealed files.
const (
	SealedResult = "result"
	SealedReview = "review"
)

// storeSealed seals a plain file (written to the sealer by write) and
// stores the sealed bytes for envelope id, through tx. The sealed bytes are
// spooled (spoolFile) between the two (a connection reads or copies, not
// both); the plaintext never is. It does nothing when the envelope has
// them already.
func (s *Store) storeSealed(ctx context.Context, tx pgx.Tx, id int64, kind, name string, sl *Sealer,
	write func(w io.Writer) error) error {
	f, size, err := s.spoolFile("sealed "+kind, func(bw io.Writer) error {
		w, err := sl.Seal(bw, name)
		if err != nil {
			return fmt.Errorf("seal the %s of envelope %d: %w", kind, id, err)
		}
		if err := write(w); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("seal the %s of envelope %d: %w", kind, id, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer f.Close()
	var added bool
	err = tx.QueryRow(ctx, sqlAddSealedResult, id, kind, sl.Recipient, sl.Signer, size).Scan(&added)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // sealed already: those bytes stay the answer
	}
	if err != nil {
		return fmt.Errorf("store the sealed %s of envelope %d: %w", kind, id, err)
	}
	src := &sealedSource{chunkSource: chunkSource{id: id, r: bufio.NewReaderSize(f, FileBuffer), buf: make([]byte, chunkSize)}, kind: kind}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"sealed_result_chunks"}, []string{"envelope_id", "kind", "n", "data"}, src); err != nil {
		return fmt.Errorf("store the sealed %s of envelope %d: %w", kind, id, err)
	}
	if src.total != size {
		return fmt.Errorf("store the sealed %s of envelope %d: %d bytes stored of %d", kind, id, src.total, size)
	}
	return nil
}

// spoolFile writes a file (what names it in errors) through write to an
// unlinked temporary file in the spool directory, buffered, and returns it
// rewound, with its size: a file built from what a transaction reads, to
// be stored through the same transaction once it is whole. The caller
// closes it.
func (s *Store) spoolFile(what string, write func(w io.Writer) error) (*os.File, int64, error) {
	f, err := os.CreateTemp(s.spoolDir, "payintake-spool-*")
	if err != nil {
		return nil, 0, fmt.Errorf("spool the %s: %w", what, err)
	}
	_ = os.Remove(f.Name()) // unlinked: the space is freed whatever happens
	bw := bufio.NewWriterSize(f, FileBuffer)
	size, err := func() (int64, error) {
		if err := write(bw); err != nil {
			return 0, err
		}
		if err := bw.Flush(); err != nil {
			return 0, fmt.Errorf("spool the %s: %w", what, err)
		}
		size, err := f.Seek(0, io.SeekCurrent)
		if err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			return 0, fmt.Errorf("spool the %s: %w", what, err)
		}
		return size, nil
	}()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, size, nil
}

type sealedSource struct {
	chunkSource
	kind string
}

func (c *sealedSource) Values() ([]any, error) { return []any{c.id, c.kind, c.n - 1, c.cur}, nil }

// SealResult seals the stored result of envelope id (written in tx).
func (s *Store) SealResult(ctx context.Context, tx pgx.Tx, env *Envelope, sl *Sealer) error {
	name := ResultName(PlainName(env.FileName))
	return s.storeSealed(ctx, tx, env.ID, SealedResult, name, sl, func(w io.Writer) error {
		return writeChunks(ctx, tx, ResultWriter(*env, w), fmt.Sprintf("result of envelope %d", env.ID), sqlResultChunks, env.ID)
	})
}

// SealReviews seals, in tx, the review reports of partner's submissions
// whose results go back sealed and that have none sealed yet: those WriteReviewReports
// wrote in tx. Without a sealer (Options.Sealer)
// they stay plain.
func (s *Store) SealReviews(ctx context.Context, tx pgx.Tx, partner string) error {
	if s.sealer == nil {
		return nil
	}
	rows, err := tx.Query(ctx, sqlReviewsToSeal, partner)
	if err != nil {
		return fmt.Errorf("read review reports to seal: %w", err)
	}
	type report struct {
		id   int64
		name string
		data []byte
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (report, error) {
		var x report
		return x, r.Scan(&x.id, &x.name, &x.data)
	})
	if err != nil || len(all) == 0 {
		return err
	}
	sl, err := s.sealer(ctx, s, partner)
	if err != nil || sl == nil {
		return err
	}
	for _, x := range all {
		err := s.storeSealed(ctx, tx, x.id, SealedReview, ReviewReportName(x.name), sl, func(w io.Writer) error {
			_, err := w.Write(x.data)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// SealedInfo describes a sealed result or review report.
type SealedInfo struct {
	Recipient, Signer string
	Size              int64
}

// Sealed reads whether envelope id's result (or review report) is stored
// sealed; ok is false when it is not.
func (s *Store) Sealed(ctx context.Context, id int64, kind string) (SealedInfo, bool, error) {
	var si SealedInfo
	err := s.pool.QueryRow(ctx, sqlSealedResult, id, kind).Scan(&si.Recipient, &si.Signer, &si.Size)
	if errors.Is(err, pgx.ErrNoRows) {
		return si, false, nil
	}
	if err != nil {
		return si, false, fmt.Errorf("read the sealed %s of envelope %d: %w", kind, id, err)
	}
	return si, true, nil
}

// WriteSealed streams the stored sealed result (or review report) of the
// envelope id (not following repeats: give the outcome's id) to w.
func (s *Store) WriteSealed(ctx context.Context, id int64, kind string, w io.Writer) error {
	return writeChunks(ctx, s.pool, w, fmt.Sprintf("sealed %s of envelope %d", kind, id), sqlSealedResultChunks, id, kind)
}
