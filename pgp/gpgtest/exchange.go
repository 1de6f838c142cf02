package gpgtest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payintake/payintake/pgp"
	"github.com/payintake/payintake/records"
)

// Exchange is both sides of an OpenPGP exchange in a test: the platform's
// keys in the store, and a partner in the store with a GnuPG key of its own
// (in its GnuPG home, with the platform's public keys imported).
type Exchange struct {
	*GPG
	Store      *records.Store
	Partner    string
	PartnerKey string // the partner's fingerprint
	Platform   string // the platform key partners encrypt to (the newest)
}

// NewExchange adds a platform key (rsa: RSA 4096) and gives partner (made
// if it does not exist) a GnuPG key of algo and the OpenPGP policy.
func NewExchange(t testing.TB, st *records.Store, partner, policy, algo string, rsa bool) *Exchange {
	t.Helper()
	x := &Exchange{GPG: New(t), Store: st, Partner: partner}
	x.AddPlatformKey(rsa)
	x.PartnerKey = x.NewKey(partner+" <ops@"+partner+".example>", algo)
	keys, err := pgp.ReadPublicKeys(x.Export(x.PartnerKey))
	if err != nil {
		t.Fatal(err)
	}
	pk := []records.PartnerPGPKey{{Fingerprint: keys[0].Fingerprint, UserID: keys[0].UserID, PublicKey: string(keys[0].Armored)}}
	u := records.PartnerUpdate{PGP: &policy, PGPKeys: &pk}
	ctx := context.Background()
	err = st.CreatePartner(ctx, partner, u)
	if errors.Is(err, records.ErrExists) {
		err = st.UpdatePartner(ctx, partner, u)
	}
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// AddPlatformKey makes a new platform key (the one that signs from now on),
// has the partner import it, and makes it the one the partner encrypts to.
func (x *Exchange) AddPlatformKey(rsa bool) string {
	x.t.Helper()
	kp, err := pgp.NewKeyPair("payintake test", rsa, time.Now())
	if err != nil {
		x.t.Fatal(err)
	}
	if err := x.Store.AddPlatformPGPKey(context.Background(), records.PlatformPGPKey{Fingerprint: kp.Fingerprint,
		Algorithm: kp.Algorithm, PublicKey: string(kp.Public), CreatedAt: kp.Created}, kp.Secret); err != nil {
		x.t.Fatal(err)
	}
	x.Import(kp.Public)
	x.Platform = kp.Fingerprint
	return kp.Fingerprint
}

// Seal is the partner's gpg --encrypt --sign of plain to the platform key.
func (x *Exchange) Seal(plain []byte, extra ...string) []byte {
	x.t.Helper()
	return x.Run(plain, append([]string{"--encrypt", "--sign", "--local-user", x.PartnerKey, "--recipient", x.Platform}, extra...)...)
}

// Open is the partner's gpg --decrypt of a result: it must verify the
// signature of the platform key signer; it returns the plaintext.
func (x *Exchange) Open(sealed []byte, signer string) string {
	x.t.Helper()
	out, status, err := x.Try(sealed, "--status-fd", "2", "--decrypt")
	if err != nil {
		x.t.Fatalf("gpg --decrypt of the result: %v\n%s\n%q", err, status, sealed)
	}
	if !bytes.Contains(status, []byte("[GNUPG:] GOODSIG")) || !bytes.Contains(status, []byte("[GNUPG:] VALIDSIG "+signer)) {
		x.t.Fatalf("the result is not signed by %s:\n%s", signer, status)
	}
	return string(out)
}
