package intake

// OpenPGP uploads (docs/pgp.md): decided once, when the file is received,
// whatever the door; read again, decrypting as the rows are read, when it
// is processed. The plaintext is never written anywhere.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgp"
	"github.com/payintake/payintake/records"
)

// PGPContentType is the media type of an OpenPGP message (RFC 3156), as
// uploads may declare it and sealed results are served.
const PGPContentType = "application/pgp-encrypted"

// SealedSuffix ends a sealed result's name (NAME.result.csv.pgp).
const SealedSuffix = records.SealedSuffix

// DefaultMaxPlaintext bounds the plaintext of an OpenPGP upload when
// Intake.MaxPlaintext is 0: the SFTP door's default bound on an upload
// (sftpd.DefaultMaxFileSize), so that a compressed message cannot carry
// more than a plain file may. serve sets its --max-file-size.
const DefaultMaxPlaintext = 1 << 30

func (in *Intake) maxPlaintext() int64 {
	if in.MaxPlaintext > 0 {
		return in.MaxPlaintext
	}
	return DefaultMaxPlaintext
}

// SealerOf is records.Options.Sealer: what seals partner's files (a
// review report written after its submission was processed), or nil when
// the platform or the partner has no OpenPGP key.
func SealerOf(ctx context.Context, st *records.Store, partner string) (*records.Sealer, error) {
	keys, err := pgpKeys(ctx, st, partner)
	if err != nil || !keys.CanSeal() {
		return nil, err
	}
	return sealer(keys), nil
}

// pgpKeys are the platform's active keys and the partner's current ones.
func (in *Intake) pgpKeys(ctx context.Context, partner string) (*pgp.Keys, error) {
	return pgpKeys(ctx, in.Store, partner)
}

func pgpKeys(ctx context.Context, st *records.Store, partner string) (*pgp.Keys, error) {
	secrets, err := st.PlatformPGPSecrets(ctx)
	if err != nil {
		return nil, err
	}
	pks, err := st.PartnerPGPKeys(ctx, partner, false)
	if err != nil {
		return nil, err
	}
	pubs := make([][]byte, len(pks))
	for i, k := range pks {
		pubs[i] = []byte(k.PublicKey)
	}
	return pgp.NewKeys(secrets, pubs)
}

// pgpOptions is what the partner's policy asks of a message.
func (in *Intake) pgpOptions(policy string) pgp.Options {
	req := policy == records.PGPRequire
	return pgp.Options{MaxPlaintext: in.maxPlaintext(), Encrypted: req, Signed: req}
}

func sealer(keys *pgp.Keys) *records.Sealer {
	return &records.Sealer{Recipient: keys.Recipient(), Signer: keys.Signer(),
		Seal: func(dst io.Writer, name string) (io.WriteCloser, error) { return keys.Seal(dst, name, time.Now()) }}
}

// pgpRefusal turns a pgp refusal into the file's refusal (row 0).
func pgpRefusal(err error) (*normalize.ParseError, bool) {
	var pe *pgp.Error
	if !errors.As(err, &pe) {
		return nil, false
	}
	return &normalize.ParseError{Err: pe, Message: pe.Message}, true
}

// pgpAttr is what the receipt's log line says of an OpenPGP file: the
// keys by fingerprint (never key material), the plaintext's hash (the
// submission's identity) or the refusal's code.
func pgpAttr(rec *records.EnvelopePGP) slog.Attr {
	attrs := []any{slog.Bool("encrypted", rec.Encrypted), slog.Bool("signed", rec.Signed)}
	if rec.DecryptedWith != "" {
		attrs = append(attrs, slog.String("platform_key", rec.DecryptedWith))
	}
	if rec.Signer != "" {
		attrs = append(attrs, slog.String("signer", rec.Signer))
	}
	if rec.Refusal != nil {
		attrs = append(attrs, slog.String("refused", string(rec.Refusal.Code())))
	} else {
		attrs = append(attrs, slog.String("plaintext_sha256", fmt.Sprintf("%x", rec.PlainSHA256)), slog.Int64("plaintext_bytes", rec.PlainSize))
	}
	return slog.Group("pgp", attrs...)
}

// receivedPGP is what an upload is as OpenPGP, decided at receipt.
type receivedPGP struct {
	rec      *records.EnvelopePGP // nil: a plain file, read as today
	identity []byte               // the plaintext's hash, when it was read
	seal     *records.Sealer
}

// receivePGP decides what the submission is under its partner's policy:
// an OpenPGP file (named NAME.pgp, .gpg or .asc, or marked by its door) is
// decrypted and verified, its plaintext hashed as it streams, or refused
// with its code; a plain file is refused where OpenPGP is required.
// marked: the door says the bytes are OpenPGP (SubmitOpts.PGP).
func (in *Intake) receivePGP(ctx context.Context, s Submission, marked bool) (receivedPGP, error) {
	isPGP := marked || records.IsPGPName(s.Name)
	var got receivedPGP
	p, err := in.Store.Partner(ctx, s.Partner)
	if errors.Is(err, records.ErrNotFound) {
		return got, nil // refused where partners are checked, as before
	}
	if err != nil {
		return got, err
	}
	switch {
	case p.PGP == records.PGPOff && !isPGP, p.PGP == records.PGPAccept && !isPGP, p.PGP == "":
		return got, nil
	case p.PGP == records.PGPOff:
		got.rec = &records.EnvelopePGP{Refusal: &normalize.ParseError{Err: normalize.CodePGPNotEnabled, Message: fmt.Sprintf(
			"%s is named (or sent) as an OpenPGP file, but OpenPGP is not agreed with this partner; nothing was applied: send the file plain under a name without .pgp, .gpg or .asc, or ask the platform to enable OpenPGP (payintake partner set %s --pgp accept)", s.Name, s.Partner)}}
		return got, nil
	}
	keys, err := in.pgpKeys(ctx, s.Partner)
	if err != nil {
		return got, err
	}
	if keys.CanSeal() {
		got.seal = sealer(keys)
	}
	if !isPGP { // require
		fp := keys.Signer()
		got.rec = &records.EnvelopePGP{SealResults: got.seal != nil, Refusal: &normalize.ParseError{Err: normalize.CodePGPRequired, Message: fmt.Sprintf(
			"the file is not encrypted, and this partner must encrypt and sign every file; nothing was applied: encrypt it to the platform key %s and sign it with your registered key (gpg --encrypt --sign --recipient %s FILE), then send FILE.gpg under a new file name", fp, fp)}}
		return got, nil
	}
	f, err := os.Open(s.Path)
	if err != nil {
		return got, fmt.Errorf("open received file: %w", err)
	}
	defer f.Close()
	got.rec = &records.EnvelopePGP{}
	r, err := pgp.Open(f, keys, in.pgpOptions(p.PGP))
	if err == nil {
		h := sha256.New()
		got.rec.PlainSize, err = io.Copy(h, r)
		got.rec.PlainSHA256 = h.Sum(nil)
		m := r.Message()
		got.rec.Armored, got.rec.Encrypted, got.rec.Signed = m.Armored, m.Encrypted, m.Signed
		got.rec.DecryptedWith, got.rec.Signer = m.DecryptedWith, m.Signer
	}
	if err != nil {
		pe, ok := pgpRefusal(err)
		if !ok {
			return got, fmt.Errorf("read the OpenPGP file %s: %w", s.Name, err)
		}
		// What was learnt before the refusal (armor, the key that
		// decrypted) stays, for the audit; the plaintext does not count.
		got.rec.Refusal, got.rec.PlainSHA256, got.rec.PlainSize, got.rec.Signer = pe, nil, 0, ""
	}
	if got.rec.Refusal == nil {
		got.identity = got.rec.PlainSHA256
	}
	// Under require every result goes back sealed; under accept, as the
	// file came: encrypted in, encrypted out (a refusal too, when it can).
	got.rec.SealResults = got.seal != nil && (p.PGP == records.PGPRequire || got.rec.Encrypted || got.rec.Refusal != nil)
	if !got.rec.SealResults {
		got.seal = nil
	}
	return got, nil
}

// pgpPlan readies an OpenPGP envelope for processing: its refusal, or its
// body decrypted as it is read, and the sealer of its result. ok is false
// for a plain envelope.
func (in *Intake) pgpPlan(ctx context.Context, env *records.Envelope, p records.Partner, body io.Reader, pl *apply.Plan) (io.Reader, bool, error) {
	rec, ok, err := in.Store.EnvelopePGP(ctx, env.ID)
	if err != nil || !ok {
		return body, false, err
	}
	var keys *pgp.Keys
	if rec.SealResults || rec.Refusal == nil {
		if keys, err = in.pgpKeys(ctx, env.PartnerID); err != nil {
			return nil, true, err
		}
	}
	if rec.SealResults && keys.CanSeal() {
		pl.Seal = sealer(keys)
	}
	if rec.Refusal != nil {
		return nil, true, rec.Refusal
	}
	src, ok := body.(io.ReadSeeker)
	if !ok {
		return nil, true, errors.New("an OpenPGP envelope's bytes must be seekable to be read again")
	}
	env.FileName, env.Size = records.PlainName(env.FileName), rec.PlainSize
	opt := pgp.Options{MaxPlaintext: in.maxPlaintext(), Encrypted: rec.Encrypted, Signed: rec.Signed}
	d := &decrypting{src: src, keys: keys, opt: opt}
	if err := d.open(); err != nil {
		return nil, true, err
	}
	return d, true, nil
}

// decrypting is an OpenPGP envelope's plaintext, read from its stored
// bytes; Seek(0, io.SeekStart) starts decrypting again, for a second read.
// Its refusals are *normalize.ParseError: a whole-file refusal mid-stream,
// as a CSV error is.
type decrypting struct {
	src  io.ReadSeeker
	keys *pgp.Keys
	opt  pgp.Options
	r    *pgp.Reader
}

func (d *decrypting) open() error {
	r, err := pgp.Open(d.src, d.keys, d.opt)
	if pe, ok := pgpRefusal(err); ok {
		return pe
	}
	d.r = r
	return err
}

func (d *decrypting) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if pe, ok := pgpRefusal(err); ok {
		return n, pe
	}
	return n, err
}

func (d *decrypting) Seek(offset int64, whence int) (int64, error) {
	if offset != 0 || whence != io.SeekStart {
		return 0, errors.New("an OpenPGP file is read again from its start only")
	}
	if _, err := d.src.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return 0, d.open()
}
