package intake_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/httpapi"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/pgp"
	"github.com/payintake/payintake/pgp/gpgtest"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

const pgpPayroll = "employee_ref,pay_period,component,amount,currency\n" +
	"E001,2026-11,BASE,4000.00,USD\n" +
	"E002,2026-11,BASE,3100.50,USD\n"

// pgpSide is a partner that speaks OpenPGP with GnuPG, and the platform's key.
type pgpSide struct {
	t        testing.TB
	ctx      context.Context
	st       *records.Store
	in       *intake.Intake
	partner  string
	gpg      *gpgtest.GPG
	fp       string // the partner's key
	platform string // the platform's signing key
	dir      string
}

// newPGPSide adds a platform key (rsa: RSA 4096) and a partner with a GnuPG
// key of algo under policy; the partner's gpg has the platform's key.
func newPGPSide(t testing.TB, st *records.Store, in *intake.Intake, partner, policy, algo string, rsa bool) *pgpSide {
	t.Helper()
	ctx := context.Background()
	s := &pgpSide{t: t, ctx: ctx, st: st, in: in, partner: partner, gpg: gpgtest.New(t), dir: t.TempDir()}
	s.platform = s.addPlatformKey(rsa)
	s.fp = s.gpg.NewKey(partner+" <ops@"+partner+".example>", algo)
	keys, err := pgp.ReadPublicKeys(s.gpg.Export(s.fp))
	if err != nil {
		t.Fatal(err)
	}
	pk := []records.PartnerPGPKey{{Fingerprint: keys[0].Fingerprint, UserID: keys[0].UserID, PublicKey: string(keys[0].Armored)}}
	u := records.PartnerUpdate{PGP: &policy, PGPKeys: &pk}
	err = st.CreatePartner(ctx, partner, u)
	if errors.Is(err, records.ErrExists) {
		err = st.UpdatePartner(ctx, partner, u)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *pgpSide) addPlatformKey(rsa bool) string {
	s.t.Helper()
	kp, err := pgp.NewKeyPair("payintake test", rsa, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.st.AddPlatformPGPKey(s.ctx, records.PlatformPGPKey{Fingerprint: kp.Fingerprint, Algorithm: kp.Algorithm,
		PublicKey: string(kp.Public), CreatedAt: kp.Created}, kp.Secret); err != nil {
		s.t.Fatal(err)
	}
	if s.gpg != nil {
		s.gpg.Import(kp.Public)
	}
	return kp.Fingerprint
}

// seal is gpg --encrypt --sign of plain by the partner to the platform key.
func (s *pgpSide) seal(plain string, extra ...string) []byte {
	s.t.Helper()
	return s.gpg.Run([]byte(plain), append([]string{"--encrypt", "--sign", "--local-user", s.fp, "--recipient", s.platform}, extra...)...)
}

// ingest sends data as a file called name through `payintake ingest`'s door.
func (s *pgpSide) ingest(name string, data []byte) (got, out records.Envelope) {
	s.t.Helper()
	dir := filepath.Join(s.dir, fmt.Sprint(time.Now().UnixNano()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		s.t.Fatal(err)
	}
	got, out, err := s.in.IngestFile(s.ctx, s.partner, path, "cli")
	if err != nil {
		s.t.Fatalf("ingest %s: %v", name, err)
	}
	return got, out
}

func (s *pgpSide) result(id int64) []byte {
	s.t.Helper()
	var b bytes.Buffer
	if err := s.st.WriteResult(s.ctx, id, &b); err != nil {
		s.t.Fatal(err)
	}
	return b.Bytes()
}

// open is gpg --decrypt of a sealed result: it must verify the platform's
// signature (signer), and gives the plaintext.
func (s *pgpSide) open(sealed []byte, signer string) string {
	s.t.Helper()
	out, status, err := s.gpg.Try(sealed, "--status-fd", "2", "--decrypt")
	if err != nil {
		s.t.Fatalf("gpg --decrypt of the result: %v\n%s\n%q", err, status, sealed)
	}
	if !bytes.Contains(status, []byte("[GNUPG:] GOODSIG")) || !bytes.Contains(status, []byte("[GNUPG:] VALIDSIG "+signer)) {
		s.t.Fatalf("the result is not signed by %s:\n%s", signer, status)
	}
	return string(out)
}

func TestPGPIngestRequire(t *testing.T) {
	st := pgtest.Store(t)
	in := intake.New(st, nil)
	s := newPGPSide(t, st, in, "acme", records.PGPRequire, "ed25519", false)

	sealed := s.seal(pgpPayroll, "--armor")
	got, out := s.ingest("pay.csv.asc", sealed)
	if got.Status != records.StatusProcessed || out.Counts["created"] != 2 {
		t.Fatalf("encrypted upload: %s %v, want processed with 2 created", got.Status, out.Counts)
	}
	sum := sha256.Sum256(sealed)
	if !bytes.Equal(got.SHA256, sum[:]) || got.Size != int64(len(sealed)) || got.FileName != "pay.csv.asc" {
		t.Errorf("the envelope is %q %x (%d bytes), want the bytes that arrived: %x (%d)", got.FileName, got.SHA256, got.Size, sum, len(sealed))
	}
	rec, ok, err := st.EnvelopePGP(s.ctx, got.ID)
	if err != nil || !ok || !rec.Encrypted || !rec.Signed || !rec.Armored || rec.Signer != s.fp || rec.DecryptedWith != s.platform || !rec.SealResults {
		t.Errorf("OpenPGP record %+v %v %v", rec, ok, err)
	}
	first := s.result(got.ID)
	if bytes.Contains(first, []byte("E001")) {
		t.Fatalf("the result is in the clear:\n%s", first)
	}
	plain := s.open(first, s.platform)
	if !strings.HasPrefix(plain, normalize.ResultHeader) || strings.Count(plain, ",created,") != 2 {
		t.Errorf("decrypted result:\n%s", plain)
	}
	files, err := st.ResultFiles(s.ctx, "acme")
	if err != nil || len(files) != 1 || files[0].Name != "pay.result.csv.pgp" || files[0].Size != int64(len(first)) {
		t.Errorf("result files %+v %v, want pay.result.csv.pgp of %d bytes", files, err, len(first))
	}

	// The same payroll encrypted again (binary this time: other bytes, a
	// new session key) under its name: a replay with the first result.
	again := s.seal(pgpPayroll)
	if bytes.Equal(again, sealed) {
		t.Fatal("gpg gave the same bytes twice")
	}
	got2, out2 := s.ingest("pay.csv.gpg", again)
	if got2.Status != records.StatusReplay || out2.ID != got.ID {
		t.Fatalf("re-encrypted: %s of %d, want a replay of %d", got2.Status, out2.ID, got.ID)
	}
	if !bytes.Equal(s.result(got2.ID), first) {
		t.Error("the replay's result differs from the first's bytes")
	}
	// Other plaintext under the name: refused as today.
	got3, _ := s.ingest("pay.csv.pgp", s.seal(strings.Replace(pgpPayroll, "3100.50", "3200.50", 1)))
	if got3.Status != records.StatusKeyReuse {
		t.Fatalf("other plaintext under the name: %s, want key_reuse", got3.Status)
	}
	if r := s.open(s.result(got3.ID), s.platform); !strings.Contains(r, "idempotency_key_reuse") {
		t.Errorf("key reuse result:\n%s", r)
	}
	if n := pgtest.Count(context.Background(), t, st, "SELECT count(*) FROM records WHERE partner_id = $1", "acme"); n != 2 {
		t.Errorf("%d records, want 2", n)
	}
}

func TestPGPRefusals(t *testing.T) {
	st := pgtest.Store(t)
	in := intake.New(st, nil)
	in.MaxPlaintext = 1 << 20
	s := newPGPSide(t, st, in, "acme", records.PGPRequire, "ed25519", false)
	stranger := s.gpg.NewKey("Stranger <x@stranger.example>", "ed25519")
	enc := func(extra ...string) []byte {
		return s.gpg.Run([]byte(pgpPayroll), append([]string{"--encrypt", "--recipient", s.platform}, extra...)...)
	}
	tampered := s.seal(pgpPayroll, "--compress-algo", "none")
	tampered[len(tampered)-40] ^= 1
	signedOnly := s.gpg.Run([]byte(pgpPayroll), "--sign", "--local-user", s.fp)
	bomb := s.gpg.Run(bytes.Repeat([]byte("E001,2026-11,BASE,1.00,USD\n"), 200000), "--encrypt", "--sign", "--local-user", s.fp, "--recipient", s.platform, "-z", "9")
	for i, c := range []struct {
		name string
		data []byte
		want normalize.Code
	}{
		{"pay.csv", []byte(pgpPayroll), normalize.CodePGPRequired},
		{"pay.csv.gpg", signedOnly, normalize.CodePGPRequired},
		{"pay.csv.gpg", s.gpg.Run([]byte(pgpPayroll), "--encrypt", "--sign", "--local-user", s.fp, "--recipient", stranger), normalize.CodePGPWrongKey},
		{"pay.csv.gpg", enc(), normalize.CodePGPSignatureMissing},
		{"pay.csv.gpg", enc("--sign", "--local-user", stranger), normalize.CodePGPSignatureUnknown},
		{"pay.csv.gpg", tampered, normalize.CodePGPCorrupt},
		{"pay.csv.pgp", []byte(pgpPayroll), normalize.CodePGPCorrupt},
		{"pay.csv.gpg", bomb, normalize.CodePGPTooLarge},
	} {
		t.Run(string(c.want), func(t *testing.T) {
			name := fmt.Sprintf("r%d-%s", i, c.name)
			got, out := s.ingest(name, c.data)
			if got.Status != records.StatusProcessed || out.Counts["rejected"] != 1 || len(out.Counts) != 1 {
				t.Fatalf("%s: %s %v, want processed with one rejected (row 0)", name, got.Status, out.Counts)
			}
			r := s.open(s.result(got.ID), s.platform)
			if !strings.Contains(r, ",0,") || !strings.Contains(r, string(c.want)) {
				t.Errorf("%s: result\n%s\nlacks row 0 with %s", name, r, c.want)
			}
		})
	}
	if n := pgtest.Count(context.Background(), t, st, "SELECT count(*) FROM records WHERE partner_id = $1", "acme"); n != 0 {
		t.Errorf("%d records applied from refused files", n)
	}
}

func TestPGPAcceptAndOff(t *testing.T) {
	st := pgtest.Store(t)
	in := intake.New(st, nil)
	s := newPGPSide(t, st, in, "acme", records.PGPAccept, "rsa2048", true)
	// Plain in, plain out.
	got, out := s.ingest("plain.csv", []byte(pgpPayroll))
	if out.Counts["created"] != 2 || !bytes.HasPrefix(s.result(got.ID), []byte(normalize.ResultHeader)) {
		t.Fatalf("plain file under accept: %v", out.Counts)
	}
	// Encrypted in (compressed, RSA both sides), encrypted out.
	got, out = s.ingest("enc.csv.gpg", s.seal(strings.ReplaceAll(pgpPayroll, "2026-11", "2026-12"), "--compress-algo", "zlib"))
	if out.Counts["created"] != 2 {
		t.Fatalf("encrypted file under accept: %s %v", got.Status, out.Counts)
	}
	if r := s.open(s.result(got.ID), s.platform); strings.Count(r, ",created,") != 2 {
		t.Errorf("result:\n%s", r)
	}
	// Off: an OpenPGP file is refused, not read as CSV.
	off := records.PGPOff
	if err := st.UpdatePartner(s.ctx, "acme", records.PartnerUpdate{PGP: &off}); err != nil {
		t.Fatal(err)
	}
	got, out = s.ingest("off.csv.gpg", s.seal(pgpPayroll))
	if out.Counts["rejected"] != 1 || !bytes.Contains(s.result(got.ID), []byte(normalize.CodePGPNotEnabled)) {
		t.Errorf("OpenPGP file under off: %v\n%s", out.Counts, s.result(got.ID))
	}
}

func TestPGPRotation(t *testing.T) {
	st := pgtest.Store(t)
	in := intake.New(st, nil)
	s := newPGPSide(t, st, in, "acme", records.PGPRequire, "ed25519", false)
	old := s.platform
	toOld := s.seal(pgpPayroll)
	newer := s.addPlatformKey(false)
	s.platform = newer
	// Both decrypt; the newest signs.
	got, out := s.ingest("old.csv.gpg", toOld)
	if out.Counts["created"] != 2 {
		t.Fatalf("encrypted to the older key: %v", out.Counts)
	}
	s.open(s.result(got.ID), newer)
	got, out = s.ingest("new.csv.gpg", s.seal(strings.ReplaceAll(pgpPayroll, "2026-11", "2026-12")))
	if out.Counts["created"] != 2 {
		t.Fatalf("encrypted to the newer key: %v", out.Counts)
	}
	// Retired, the old key decrypts no more; the refusal names the new one.
	if err := st.RetirePlatformPGPKey(s.ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := st.RetirePlatformPGPKey(s.ctx, old); !errors.Is(err, records.ErrNotFound) {
		t.Errorf("retiring twice: %v", err)
	}
	got, _ = s.ingest("late.csv.gpg", toOld)
	if r := s.open(s.result(got.ID), newer); !strings.Contains(r, string(normalize.CodePGPWrongKey)) || !strings.Contains(r, newer) {
		t.Errorf("encrypted to the retired key:\n%s", r)
	}
}

func TestPGPOverHTTP(t *testing.T) {
	st := pgtest.Store(t)
	in := intake.New(st, nil)
	s := newPGPSide(t, st, in, "acme", records.PGPRequire, "ed25519", false)
	api := httptest.NewServer(httpapi.New(in, partnerauth.New(st), httpapi.Config{SpoolDir: t.TempDir()}).Handler())
	t.Cleanup(api.Close)
	tok, err := st.IssueAPIToken(s.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	post := func(body []byte) *http.Response {
		req, _ := http.NewRequest("POST", api.URL+"/v1/submissions?name=pay.csv", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "pay-2026-11")
		req.Header.Set("Content-Type", intake.PGPContentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := post(s.seal(pgpPayroll))
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	loc := resp.Header.Get("Location")
	get := func() (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", api.URL+loc+"/result.csv", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r, b
	}
	r, first := get()
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != intake.PGPContentType ||
		!strings.Contains(r.Header.Get("Content-Disposition"), "pay.result.csv.pgp") {
		t.Fatalf("GET result: %d %v", r.StatusCode, r.Header)
	}
	if p := s.open(first, s.platform); strings.Count(p, ",created,") != 2 {
		t.Errorf("result:\n%s", p)
	}
	// Encrypted again under the same key: the stored answer, not a key reuse.
	resp = post(s.seal(pgpPayroll))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" || resp.Header.Get("Location") != loc {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("re-encrypted POST: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if _, again := get(); !bytes.Equal(again, first) {
		t.Error("the result's bytes changed between reads")
	}
	resp = post(s.seal(strings.Replace(pgpPayroll, "3100.50", "1.00", 1)))
	if resp.StatusCode == http.StatusCreated {
		t.Error("other plaintext under the key was accepted")
	}
}

func TestPGPOverSFTP(t *testing.T) {
	z := newDropZone(t, zoneOpts{})
	in := intake.New(z.store, nil)
	key := z.partner("acme")
	s := newPGPSide(t, z.store, in, "acme", records.PGPRequire, "ed25519", false)
	c := z.login("acme", key)
	put(t, c, "/inbox/pay.csv.gpg", s.seal(pgpPayroll))
	res := waitResult(t, c, "pay.result.csv.pgp")
	if p := s.open(res, s.platform); strings.Count(p, ",created,") != 2 {
		t.Errorf("result over SFTP:\n%s", p)
	}
	put(t, c, "/inbox/plain.csv", []byte(pgpPayroll))
	if p := s.open(waitResult(t, c, "plain.result.csv.pgp"), s.platform); !strings.Contains(p, string(normalize.CodePGPRequired)) {
		t.Errorf("plain upload under require:\n%s", p)
	}
	// Metrics and the receipt's log line name the keys by fingerprint only.
	if n := z.metric("payintake_pgp_files_total", "result=ok", "platform_key="+s.platform, "signer="+s.fp); n != 1 {
		t.Errorf("payintake_pgp_files_total ok = %v, want 1", n)
	}
	if n := z.metric("payintake_pgp_files_total", "result=pgp_required", "platform_key=none", "signer=none"); n != 1 {
		t.Errorf("payintake_pgp_files_total pgp_required = %v, want 1", n)
	}
	logs := z.logs.String()
	if !strings.Contains(logs, "pgp.platform_key="+s.platform) || !strings.Contains(logs, "pgp.signer="+s.fp) || !strings.Contains(logs, "pgp.refused=pgp_required") {
		t.Errorf("the receipt's log lines do not name the keys and the refusal:\n%s", logs)
	}
	if strings.Contains(logs, "BEGIN PGP") {
		t.Error("key material in the logs")
	}
}
