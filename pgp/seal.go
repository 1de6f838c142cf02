package pgp

import (
	"crypto"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"
	openpgp "github.com/ProtonMail/go-crypto/openpgp/v2"
)

// ErrNoRecipient: the partner has no public key to encrypt to.
var ErrNoRecipient = errors.New("the partner has no OpenPGP public key to encrypt to: register it with payintake partner set ID --pgp-key FILE")

// ErrNoSigner: the platform has no active OpenPGP key to sign with.
var ErrNoSigner = errors.New("the platform has no active OpenPGP key to sign with: create one with payintake pgp key create")

// CanSeal tells whether Seal can work: a partner key and a platform key.
func (k *Keys) CanSeal() bool { return len(k.partner) > 0 && len(k.platform) > 0 }

// Seal returns a writer whose bytes are encrypted to the partner's newest
// key and signed by the platform's signing key, written binary to dst as
// one message (`gpg --decrypt` reads it and checks the signature). name is
// the literal data's file name; now the signature's time. Closing the
// writer writes the signature; it does not close dst.
func (k *Keys) Seal(dst io.Writer, name string, now time.Time) (io.WriteCloser, error) {
	if len(k.partner) == 0 {
		return nil, ErrNoRecipient
	}
	if len(k.platform) == 0 {
		return nil, ErrNoSigner
	}
	cfg := &packet.Config{
		Time:          func() time.Time { return now },
		DefaultHash:   crypto.SHA256,
		DefaultCipher: packet.CipherAES256,
	}
	w, err := openpgp.Encrypt(dst, k.partner[:1], nil, k.platform[:1], &openpgp.FileHints{FileName: name, ModTime: now}, cfg)
	if err != nil {
		return nil, fmt.Errorf("encrypt to %s signed by %s: %w", k.Recipient(), k.Signer(), err)
	}
	return w, nil
}
