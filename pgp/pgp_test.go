package pgp_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgp"
	"github.com/payintake/payintake/pgp/gpgtest"
)

const payroll = "employee_ref,pay_period,component,amount,currency\nE1,2026-11,base,1000.00,EUR\n"

// side is a partner's GnuPG with its key, and the platform's key imported.
type side struct {
	gpg      *gpgtest.GPG
	fp       string
	platform pgp.KeyPair
}

func newSide(t *testing.T, partnerAlgo string, rsaPlatform bool) side {
	t.Helper()
	kp, err := pgp.NewKeyPair("payintake test", rsaPlatform, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	g := gpgtest.New(t)
	fp := g.NewKey("Partner <ops@partner.example>", partnerAlgo)
	g.Import(kp.Public)
	return side{gpg: g, fp: fp, platform: kp}
}

func (s side) keys(t *testing.T) *pgp.Keys {
	t.Helper()
	pub, err := pgp.ReadPublicKeys(s.gpg.Export(s.fp))
	if err != nil {
		t.Fatal(err)
	}
	if len(pub) != 1 || pub[0].Fingerprint != s.fp {
		t.Fatalf("read partner key %+v, want fingerprint %s", pub, s.fp)
	}
	k, err := pgp.NewKeys([][]byte{s.platform.Secret}, [][]byte{pub[0].Armored})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func open(t *testing.T, k *pgp.Keys, msg []byte, opt pgp.Options) ([]byte, pgp.Message, error) {
	t.Helper()
	r, err := pgp.Open(bytes.NewReader(msg), k, opt)
	if err != nil {
		return nil, pgp.Message{}, err
	}
	b, err := io.ReadAll(r)
	return b, r.Message(), err
}

var strict = pgp.Options{Encrypted: true, Signed: true, MaxPlaintext: 1 << 20}

func TestGnuPGToPlatformAndBack(t *testing.T) {
	for _, c := range []struct {
		name        string
		partnerAlgo string
		rsa         bool
		gpgArgs     []string
	}{
		{"ed25519 armored", "ed25519", false, []string{"--armor"}},
		{"ed25519 binary uncompressed", "ed25519", false, []string{"--compress-algo", "none"}},
		{"ed25519 binary zlib", "ed25519", false, []string{"--compress-algo", "zlib", "-z", "9"}},
		{"rsa platform rsa partner", "rsa2048", true, []string{"--armor", "--compress-algo", "zip"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSide(t, c.partnerAlgo, c.rsa)
			k := s.keys(t)
			args := append([]string{"--encrypt", "--sign", "--local-user", s.fp, "--recipient", s.platform.Fingerprint, "--set-filename", "pay.csv"}, c.gpgArgs...)
			msg := s.gpg.Run([]byte(payroll), args...)
			got, m, err := open(t, k, msg, strict)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if string(got) != payroll {
				t.Errorf("plaintext %q, want %q", got, payroll)
			}
			if !m.Encrypted || !m.Signed || m.Signer != s.fp || m.DecryptedWith != s.platform.Fingerprint {
				t.Errorf("message %+v: want encrypted with %s, signed by %s", m, s.platform.Fingerprint, s.fp)
			}
			if m.Armored != (c.gpgArgs[0] == "--armor") {
				t.Errorf("armored %v for gpg %v", m.Armored, c.gpgArgs)
			}

			// The result back: gpg decrypts it and verifies the platform's signature.
			var sealed bytes.Buffer
			w, err := k.Seal(&sealed, "pay.result.csv", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(w, "result\n")
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			out, status, err := s.gpg.Try(sealed.Bytes(), "--status-fd", "2", "--decrypt")
			if err != nil {
				t.Fatalf("gpg --decrypt: %v\n%s", err, status)
			}
			if string(out) != "result\n" {
				t.Errorf("gpg decrypted %q", out)
			}
			if !bytes.Contains(status, []byte("[GNUPG:] VALIDSIG "+s.platform.Fingerprint)) &&
				!bytes.Contains(status, []byte(" "+s.platform.Fingerprint+"\n")) {
				t.Errorf("gpg did not verify the platform's signature %s:\n%s", s.platform.Fingerprint, status)
			}
			if !bytes.Contains(status, []byte("[GNUPG:] GOODSIG")) {
				t.Errorf("no good signature:\n%s", status)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	s := newSide(t, "ed25519", false)
	k := s.keys(t)
	other := s.gpg.NewKey("Stranger <x@stranger.example>", "ed25519")
	enc := func(extra ...string) []byte {
		return s.gpg.Run([]byte(payroll), append([]string{"--encrypt", "--recipient", s.platform.Fingerprint}, extra...)...)
	}
	good := enc("--sign", "--local-user", s.fp, "--compress-algo", "none")
	tampered := bytes.Clone(good)
	tampered[len(tampered)-40] ^= 0x01
	// A signed, unencrypted, uncompressed message: its literal bytes are in
	// the clear, so one can be changed without touching the encryption.
	signedOnly := s.gpg.Run([]byte(payroll), "--sign", "--local-user", s.fp, "--compress-algo", "none")
	forged := bytes.Replace(signedOnly, []byte("1000.00"), []byte("9000.00"), 1)
	if bytes.Equal(forged, signedOnly) {
		t.Fatal("the amount is not in the signed message's clear bytes")
	}
	bomb := s.gpg.Run(bytes.Repeat([]byte("0"), 8<<20), "--encrypt", "--sign", "--local-user", s.fp, "--recipient", s.platform.Fingerprint, "--compress-algo", "zlib", "-z", "9")
	if len(bomb) > 100<<10 {
		t.Fatalf("the bomb is %d bytes: not compressed", len(bomb))
	}
	for _, c := range []struct {
		name string
		msg  []byte
		opt  pgp.Options
		want normalize.Code
		says string
	}{
		{"wrong key", s.gpg.Run([]byte(payroll), "--encrypt", "--sign", "--local-user", s.fp, "--recipient", other), strict, normalize.CodePGPWrongKey, s.platform.Fingerprint},
		{"passphrase", s.gpg.Run([]byte(payroll), "--symmetric", "--passphrase", "x"), strict, normalize.CodePGPWrongKey, s.platform.Fingerprint},
		{"not signed", enc(), strict, normalize.CodePGPSignatureMissing, "not signed"},
		{"signed by a stranger", enc("--sign", "--local-user", other), strict, normalize.CodePGPSignatureUnknown, other},
		{"stranger under accept", enc("--sign", "--local-user", other), pgp.Options{}, normalize.CodePGPSignatureUnknown, other},
		{"signed only under require", signedOnly, strict, normalize.CodePGPRequired, "not encrypted"},
		{"forged", forged, pgp.Options{Signed: true}, normalize.CodePGPSignatureInvalid, s.fp},
		{"tampered ciphertext", tampered, strict, normalize.CodePGPCorrupt, "integrity"},
		{"not OpenPGP", []byte(payroll), strict, normalize.CodePGPCorrupt, "not a readable OpenPGP message"},
		{"armor of a key", s.gpg.Export(s.fp), strict, normalize.CodePGPCorrupt, "PGP PUBLIC KEY BLOCK"},
		{"decompression bomb", bomb, strict, normalize.CodePGPTooLarge, "limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := open(t, k, c.msg, c.opt)
			var pe *pgp.Error
			if !errors.As(err, &pe) || !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %s", err, c.want)
			}
			if !strings.Contains(pe.Message, c.says) {
				t.Errorf("message %q does not say %q", pe.Message, c.says)
			}
		})
	}
	// Under accept, an unsigned encrypted file opens.
	got, m, err := open(t, k, enc(), pgp.Options{})
	if err != nil || string(got) != payroll || m.Signed || !m.Encrypted {
		t.Errorf("unsigned under accept: %q %+v %v", got, m, err)
	}
}

func TestRotationDecryptsWithEitherKey(t *testing.T) {
	s := newSide(t, "ed25519", false)
	newer, err := pgp.NewKeyPair("payintake test 2", false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.gpg.Import(newer.Public)
	pub := s.gpg.Export(s.fp)
	both, err := pgp.NewKeys([][]byte{newer.Secret, s.platform.Secret}, [][]byte{pub})
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{s.platform.Fingerprint, newer.Fingerprint} {
		msg := s.gpg.Run([]byte(payroll), "--encrypt", "--sign", "--local-user", s.fp, "--recipient", to)
		_, m, err := open(t, both, msg, strict)
		if err != nil || m.DecryptedWith != to {
			t.Errorf("encrypted to %s: decrypted with %q, %v", to, m.DecryptedWith, err)
		}
	}
	if both.Signer() != newer.Fingerprint {
		t.Errorf("signer %s, want the newest %s", both.Signer(), newer.Fingerprint)
	}
	onlyNew, err := pgp.NewKeys([][]byte{newer.Secret}, [][]byte{pub})
	if err != nil {
		t.Fatal(err)
	}
	msg := s.gpg.Run([]byte(payroll), "--encrypt", "--sign", "--local-user", s.fp, "--recipient", s.platform.Fingerprint)
	if _, _, err := open(t, onlyNew, msg, strict); !errors.Is(err, normalize.CodePGPWrongKey) || !strings.Contains(err.Error(), newer.Fingerprint) {
		t.Errorf("to the retired key: %v, want pgp_wrong_key naming %s", err, newer.Fingerprint)
	}
}

func TestReadPublicKeysRefusesSecrets(t *testing.T) {
	kp, err := pgp.NewKeyPair("x", false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgp.ReadPublicKeys(kp.Secret); err == nil || !strings.Contains(err.Error(), "secret key") {
		t.Errorf("a secret key was read as a public key: %v", err)
	}
	pub, err := pgp.ReadPublicKeys(kp.Public)
	if err != nil || len(pub) != 1 || pub[0].Fingerprint != kp.Fingerprint || pub[0].UserID != "x" {
		t.Errorf("read %+v, %v", pub, err)
	}
}
