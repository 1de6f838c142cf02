// Package pgp is the platform's OpenPGP: it makes the platform's key pairs,
// reads a partner's public keys, opens an encrypted and signed message as a
// stream (decrypting and verifying as the plaintext is read, so no plaintext
// is ever written anywhere) and seals a result (encrypted to the partner,
// signed by the platform). It knows nothing of files, doors or the store:
// its refusals are normalize codes with a sentence saying what to do.
//
// The implementation is github.com/ProtonMail/go-crypto's openpgp/v2, the
// maintained successor of the deprecated golang.org/x/crypto/openpgp.
package pgp

import (
	"bytes"
	"crypto"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	openpgp "github.com/ProtonMail/go-crypto/openpgp/v2"

	"github.com/payintake/payintake/normalize"
)

// Error is a message refused: Code says why (one of normalize's pgp_ codes),
// Message what to do. Err, when set, is the library's cause.
type Error struct {
	Code    normalize.Code
	Message string
	Err     error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap gives the code (errors.Is(err, normalize.CodePGPCorrupt)) and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Code}
	}
	return []error{e.Code, e.Err}
}

func refuse(code normalize.Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}

// Fingerprint is how a key is named everywhere (logs, metrics, messages,
// the store): its primary key's fingerprint in upper-case hex, as
// `gpg --fingerprint` prints it without spaces.
func Fingerprint(e *openpgp.Entity) string {
	return strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
}

// KeyPair is a new platform key: Secret is the transferable secret key
// (binary, unprotected: the store seals it), Public the armored public key.
type KeyPair struct {
	Fingerprint string
	Algorithm   string // "ed25519/cv25519" or "rsa4096"
	Created     time.Time
	Public      []byte
	Secret      []byte
}

// Algorithms of NewKeyPair.
const (
	AlgoEd25519 = "ed25519/cv25519"
	AlgoRSA4096 = "rsa4096"
)

// NewKeyPair makes a platform key: a signing primary key and an encryption
// subkey, Ed25519 and Cv25519 by default (v4 keys: what GnuPG 2.2 and later
// read), RSA 4096 both when rsa is true (for partners whose tools know no
// elliptic curves). userID names it in the partner's keyring.
func NewKeyPair(userID string, rsa bool, now time.Time) (KeyPair, error) {
	cfg := &packet.Config{
		Time:          func() time.Time { return now },
		DefaultHash:   crypto.SHA256,
		DefaultCipher: packet.CipherAES256,
		Algorithm:     packet.PubKeyAlgoEdDSA,
		Curve:         packet.Curve25519,
	}
	algo := AlgoEd25519
	if rsa {
		cfg.Algorithm, cfg.RSABits, algo = packet.PubKeyAlgoRSA, 4096, AlgoRSA4096
	}
	e, err := openpgp.NewEntity(userID, "", "", cfg)
	if err != nil {
		return KeyPair{}, fmt.Errorf("make OpenPGP key: %w", err)
	}
	var sec bytes.Buffer
	if err := e.SerializePrivate(&sec, cfg); err != nil {
		return KeyPair{}, fmt.Errorf("serialize OpenPGP secret key: %w", err)
	}
	pub, err := armoredPublic(e)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{Fingerprint: Fingerprint(e), Algorithm: algo, Created: e.PrimaryKey.CreationTime,
		Public: pub, Secret: sec.Bytes()}, nil
}

func armoredPublic(e *openpgp.Entity) ([]byte, error) {
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, fmt.Errorf("armor public key: %w", err)
	}
	if err := e.Serialize(w); err != nil {
		return nil, fmt.Errorf("serialize public key: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("armor public key: %w", err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// PublicKey is one of a partner's public keys as registered.
type PublicKey struct {
	Fingerprint string
	UserID      string // its primary identity, for listings
	Armored     []byte // the key alone, armored
}

// ReadPublicKeys reads the public keys of a file as `gpg --export --armor`
// writes it (binary works too). Every key must be able to encrypt (results
// are encrypted to it) and sign (uploads are signed by it); a secret key
// is refused, so that nobody hands the platform a partner's secret.
func ReadPublicKeys(data []byte) ([]PublicKey, error) {
	el, err := readKeyRing(data)
	if err != nil {
		return nil, err
	}
	var out []PublicKey
	now := time.Now()
	for _, e := range el {
		fp := Fingerprint(e)
		if e.PrivateKey != nil {
			return nil, fmt.Errorf("key %s is a secret key: give the public key only (gpg --export --armor %s)", fp, fp)
		}
		if _, err := e.EncryptionKeyWithError(now, nil); err != nil {
			return nil, fmt.Errorf("key %s cannot encrypt (results are encrypted to it): %w", fp, err)
		}
		if _, ok := e.SigningKey(now, nil); !ok {
			return nil, fmt.Errorf("key %s has no valid signing key (uploads are signed with it)", fp)
		}
		pub, err := armoredPublic(e)
		if err != nil {
			return nil, err
		}
		var uid string
		if _, id := e.PrimaryIdentity(now, nil); id != nil {
			uid = id.Name
		}
		out = append(out, PublicKey{Fingerprint: fp, UserID: uid, Armored: pub})
	}
	if len(out) == 0 {
		return nil, errors.New("no OpenPGP public key in the file: export it with gpg --export --armor KEYID")
	}
	return out, nil
}

func readKeyRing(data []byte) (openpgp.EntityList, error) {
	if isArmored(data) {
		el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("read armored OpenPGP keys: %w", err)
		}
		return el, nil
	}
	el, err := openpgp.ReadKeyRing(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read OpenPGP keys: %w", err)
	}
	return el, nil
}

func isArmored(head []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("-----BEGIN PGP"))
}

// Keys are what opening and sealing need: the platform's secret keys that
// may decrypt (the first signs), and the partner's public keys.
type Keys struct {
	platform openpgp.EntityList
	partner  openpgp.EntityList
}

// NewKeys reads the platform's secret keys (as KeyPair.Secret, the signing
// one first) and the partner's public keys (armored or binary).
func NewKeys(platformSecrets [][]byte, partnerPublic [][]byte) (*Keys, error) {
	k := &Keys{}
	for i, s := range platformSecrets {
		el, err := openpgp.ReadKeyRing(bytes.NewReader(s))
		if err != nil {
			return nil, fmt.Errorf("read platform secret key %d: %w", i+1, err)
		}
		k.platform = append(k.platform, el...)
	}
	for _, p := range partnerPublic {
		el, err := readKeyRing(p)
		if err != nil {
			return nil, err
		}
		k.partner = append(k.partner, el...)
	}
	return k, nil
}

// Signer is the fingerprint of the platform key that signs ("" none).
func (k *Keys) Signer() string {
	if len(k.platform) == 0 {
		return ""
	}
	return Fingerprint(k.platform[0])
}

// Recipient is the fingerprint of the partner key results are encrypted to
// (its newest: the first given; "" none).
func (k *Keys) Recipient() string {
	if len(k.partner) == 0 {
		return ""
	}
	return Fingerprint(k.partner[0])
}

// keyring answers the library's look-ups from both sets: the platform's
// keys decrypt, the partner's verify. A signature by a platform key is
// found too, and then refused as unknown (open checks the signer's set).
type keyring struct{ k *Keys }

func (r keyring) KeysById(id uint64) []openpgp.Key {
	return append(r.k.platform.KeysById(id), r.k.partner.KeysById(id)...)
}

func (r keyring) EntitiesById(id uint64) []*openpgp.Entity {
	return append(r.k.platform.EntitiesById(id), r.k.partner.EntitiesById(id)...)
}

func (k *Keys) isPartner(e *openpgp.Entity) bool {
	if e == nil {
		return false
	}
	for _, p := range k.partner {
		if bytes.Equal(p.PrimaryKey.Fingerprint, e.PrimaryKey.Fingerprint) {
			return true
		}
	}
	return false
}

func fingerprints(el openpgp.EntityList) string {
	fps := make([]string, len(el))
	for i, e := range el {
		fps[i] = Fingerprint(e)
	}
	return strings.Join(fps, ", ")
}
