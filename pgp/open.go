package pgp

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	openpgp "github.com/ProtonMail/go-crypto/openpgp/v2"

	"github.com/payintake/payintake/normalize"
)

// Options say what a message must be to be opened.
type Options struct {
	// MaxPlaintext bounds the plaintext (the literal data, after
	// decompression): a small message that inflates beyond it is refused
	// with pgp_too_large as soon as the limit is passed. 0: no bound.
	MaxPlaintext int64
	// Encrypted and Signed require the message to be encrypted to a
	// platform key and signed by one of the partner's keys. A signature
	// present is always verified, required or not.
	Encrypted, Signed bool
}

// Message is what a message turned out to be. Signer is set once the
// plaintext has been read to its end and the signature verified.
type Message struct {
	Armored   bool
	Encrypted bool
	// DecryptedWith is the platform key that decrypted it ("" not encrypted).
	DecryptedWith string
	Signed        bool
	// Signer is the partner key whose signature verified ("" none).
	Signer string
	// FileName is the name the sender's literal data packet carries.
	FileName string
}

// Reader is an opened message: reading it yields the plaintext, decrypted
// and hashed as it is read. Its last Read returns io.EOF only when the
// integrity check (MDC or AEAD) and the signature verified; otherwise it
// returns an *Error. A refusal found before the first byte (wrong key, no
// encryption where required) is returned by Open.
type Reader struct {
	msg  Message
	md   *openpgp.MessageDetails
	body io.Reader
	keys *Keys
	opt  Options
	read int64
	err  error
}

// Message returns what the message is; Signer is known after io.EOF.
func (r *Reader) Message() Message { return r.msg }

// Open starts reading the OpenPGP message in src (binary, or armored as
// `gpg --armor` writes it) with keys, as opt requires.
func Open(src io.Reader, keys *Keys, opt Options) (*Reader, error) {
	br := bufio.NewReaderSize(src, 64<<10)
	head, _ := br.Peek(64)
	r := &Reader{keys: keys, opt: opt}
	var in io.Reader = br
	if isArmored(head) {
		block, err := armor.Decode(br)
		if err != nil {
			return nil, refuse(normalize.CodePGPCorrupt, err, "the file is named as OpenPGP and starts like ASCII armor, but its armor cannot be read (%v); nothing was applied: send the output of gpg --encrypt --sign --armor unchanged, under a new file name", err)
		}
		if block.Type != "PGP MESSAGE" {
			return nil, refuse(normalize.CodePGPCorrupt, nil, "the armored block is a %q, not a PGP MESSAGE (clear-signed text and detached signatures are not read); nothing was applied: send the output of gpg --encrypt --sign, under a new file name", block.Type)
		}
		r.msg.Armored = true
		in = block.Body
	}
	cfg := r.config()
	md, err := openpgp.ReadMessage(in, keyring{keys}, nil, cfg)
	if err != nil {
		return nil, r.openError(err)
	}
	r.md = md
	r.msg.Encrypted = md.IsEncrypted
	r.msg.Signed = md.IsSigned
	if md.IsEncrypted && md.DecryptedWith.Entity != nil {
		r.msg.DecryptedWith = Fingerprint(md.DecryptedWith.Entity)
	}
	if md.LiteralData != nil {
		r.msg.FileName = md.LiteralData.FileName
	}
	if opt.Encrypted && !md.IsEncrypted {
		return nil, refuse(normalize.CodePGPRequired, nil, "the file is signed but not encrypted, and this partner must encrypt; nothing was applied: encrypt it to the platform key %s (gpg --encrypt --sign --recipient %s) and send it under a new file name", keys.Signer(), keys.Signer())
	}
	if opt.Signed && !md.IsSigned {
		return nil, r.unsigned()
	}
	r.body = md.UnverifiedBody
	return r, nil
}

func (r *Reader) config() *packet.Config {
	cfg := &packet.Config{Time: time.Now}
	if r.opt.MaxPlaintext > 0 {
		// The library's own bound on inflation, a little above ours so
		// that ours (with its message) is the one that speaks.
		limit := r.opt.MaxPlaintext + 1<<20
		cfg.MaxDecompressedMessageSize = &limit
	}
	return cfg
}

// openError classifies a failure to start reading the message.
func (r *Reader) openError(err error) *Error {
	if errors.Is(err, pgperrors.ErrKeyIncorrect) {
		use := r.keys.Signer()
		if use == "" {
			return refuse(normalize.CodePGPWrongKey, err, "the file is encrypted, but the platform has no OpenPGP key yet; nothing was applied: ask the platform for its key (payintake pgp key create, then export)")
		}
		return refuse(normalize.CodePGPWrongKey, err, "the file is encrypted to a key the platform does not hold (or with a passphrase); the platform decrypts with %s only; nothing was applied: encrypt to %s (gpg --encrypt --sign --recipient %s) and send it under a new file name", fingerprints(r.keys.platform), use, use)
	}
	var unsup pgperrors.UnsupportedError
	if errors.As(err, &unsup) {
		return refuse(normalize.CodePGPCorrupt, err, "the OpenPGP message uses something that is not accepted (%v); nothing was applied: encrypt with gpg's defaults (gpg --encrypt --sign) and send it under a new file name", err)
	}
	return refuse(normalize.CodePGPCorrupt, err, "the file is not a readable OpenPGP message (%v); nothing was applied: send the output of gpg --encrypt --sign unchanged (binary, or with --armor), under a new file name", err)
}

func (r *Reader) unsigned() *Error {
	return refuse(normalize.CodePGPSignatureMissing, nil, "the file is not signed, and this partner must sign; nothing was applied: sign it with your registered key (gpg --encrypt --sign --local-user YOURKEY --recipient %s) and send it under a new file name", r.keys.Signer())
}

// Read reads plaintext. The size limit, the integrity check and the
// signature are enforced here, as the plaintext goes by.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.body.Read(p)
	r.read += int64(n)
	if r.opt.MaxPlaintext > 0 && r.read > r.opt.MaxPlaintext {
		r.err = refuse(normalize.CodePGPTooLarge, nil, "the decrypted file is larger than the limit of %d bytes (it may be a compressed message that inflates without end); nothing was applied: split the payroll run into smaller files", r.opt.MaxPlaintext)
		return 0, r.err
	}
	switch {
	case err == io.EOF:
		if verr := r.verify(); verr != nil {
			r.err = verr
			return n, verr
		}
		r.err = io.EOF
		return n, io.EOF
	case err != nil:
		r.err = r.readError(err)
		return n, r.err
	}
	return n, nil
}

func (r *Reader) readError(err error) *Error {
	if errors.Is(err, pgperrors.ErrMessageTooLarge) {
		return refuse(normalize.CodePGPTooLarge, err, "the decrypted file inflates beyond the limit of %d bytes; nothing was applied: split the payroll run into smaller files", r.opt.MaxPlaintext)
	}
	return refuse(normalize.CodePGPCorrupt, err, "the OpenPGP message is damaged or was altered after it was encrypted (its integrity check failed: %v); nothing was applied: encrypt the file again and send it under a new file name, as a binary transfer", err)
}

// verify runs at the end of the plaintext, after the library checked the
// integrity (MDC or AEAD) and the signatures.
func (r *Reader) verify() *Error {
	md := r.md
	if !md.IsSigned {
		if r.opt.Signed {
			return r.unsigned()
		}
		return nil
	}
	if md.SignatureError == nil && md.SignedBy != nil {
		if !r.keys.isPartner(md.SignedBy.Entity) {
			return refuse(normalize.CodePGPSignatureUnknown, nil, "the file is signed by %s, which is not one of this partner's registered keys (%s); nothing was applied: sign with a registered key, or have the platform register this one (payintake partner set ID --pgp-key FILE), and send it under a new file name", Fingerprint(md.SignedBy.Entity), orNone(fingerprints(r.keys.partner)))
		}
		r.msg.Signer = Fingerprint(md.SignedBy.Entity)
		return nil
	}
	if c := md.SelectedCandidate; c != nil && c.SignedBy != nil && c.SignedBy.Entity != nil {
		if !r.keys.isPartner(c.SignedBy.Entity) {
			return refuse(normalize.CodePGPSignatureUnknown, md.SignatureError, "the file is signed by %s, which is not one of this partner's registered keys (%s); nothing was applied: sign with a registered key and send it under a new file name", Fingerprint(c.SignedBy.Entity), orNone(fingerprints(r.keys.partner)))
		}
		return refuse(normalize.CodePGPSignatureInvalid, md.SignatureError, "the signature by %s does not verify (%v): the file was altered after it was signed, or the signature is not valid now (key expired or revoked); nothing was applied: sign it again with a valid registered key and send it under a new file name", Fingerprint(c.SignedBy.Entity), md.SignatureError)
	}
	var issuer string
	if c := md.SelectedCandidate; c != nil {
		switch {
		case c.CorrespondingSig != nil && len(c.CorrespondingSig.IssuerFingerprint) > 0:
			issuer = " " + strings.ToUpper(hex.EncodeToString(c.CorrespondingSig.IssuerFingerprint))
		case len(c.IssuerFingerprint) > 0:
			issuer = " " + strings.ToUpper(hex.EncodeToString(c.IssuerFingerprint))
		case c.IssuerKeyId != 0:
			issuer = fmt.Sprintf(" %016X", c.IssuerKeyId)
		}
	}
	if errors.Is(md.SignatureError, pgperrors.ErrUnknownIssuer) || issuer != "" {
		return refuse(normalize.CodePGPSignatureUnknown, md.SignatureError, "the file is signed by key%s, which is not one of this partner's registered keys (%s); nothing was applied: sign with a registered key, or have the platform register yours (payintake partner set ID --pgp-key FILE), and send it under a new file name", issuer, orNone(fingerprints(r.keys.partner)))
	}
	return refuse(normalize.CodePGPSignatureInvalid, md.SignatureError, "the file's signature cannot be verified (%v); nothing was applied: sign it again with gpg --sign and send it under a new file name", md.SignatureError)
}

func orNone(s string) string {
	if s == "" {
		return "none registered"
	}
	return s
}
