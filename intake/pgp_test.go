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
	"github.com/payintake/payintake/pgp/gpgtest"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

const pgpPayroll = "employee_ref,pay_period,component,amount,currency\n" +
	"E001,2026-11,BASE,4000.00,USD\n" +
	"E002,2026-11,BASE,3100.50,USD\n"

// pgpSide is an OpenPGP exchange (gpgtest.Exchange) and the door of
// `payintake ingest` to send its files through.
type pgpSide struct {
	*gpgtest.Exchange
	t       testing.TB
	ctx     context.Context
	st      *records.Store
	in      *intake.Intake
	partner string
	dir     string
}

func newPGPSide(t testing.TB, st *records.Store, in *intake.Intake, partner, policy, algo string, rsa bool) *pgpSide {
	t.Helper()
	return &pgpSide{Exchange: gpgtest.NewExchange(t, st, partner, policy, algo, rsa), t: t, ctx: context.Background(),
		st: st, in: in, partner: partner, dir: t.TempDir()}
}

// seal is gpg --encrypt --sign of plain by the partner to the platform key.
func (s *pgpSide) seal(plain string, extra ...string) []byte { return s.Seal([]byte(plain), extra...) }

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
	if err != nil || !ok || !rec.Encrypted || !rec.Signed || !rec.Armored || rec.Signer != s.PartnerKey || rec.DecryptedWith != s.Platform || !rec.SealResults {
		t.Errorf("OpenPGP record %+v %v %v", rec, ok, err)
	}
	first := s.result(got.ID)
	if bytes.Contains(first, []byte("E001")) {
		t.Fatalf("the result is in the clear:\n%s", first)
	}
	plain := s.Open(first, s.Platform)
	if !strings.HasPrefix(plain, normalize.ResultHeader) || strings.Count(plain, ",created,") != 2 {
		t.Errorf("decrypted result:\n%s", plain)
	}
	files, err := st.ResultFiles(s.ctx, "acme")
	if err != nil || len(files) != 1 || files[0].Name != "pay.result.csv.pgp" || files[0].Size != int64(len(first)) {
		t.Errorf("result files %+v %v, want pay.result.csv.pgp of %d bytes", files, err, len(first))
	}

	// The same payroll encrypted again (binary this time: other bytes, a
	// new session key) under its name: a repeat with the first result.
	again := s.seal(pgpPayroll)
	if bytes.Equal(again, sealed) {
		t.Fatal("gpg gave the same bytes twice")
	}
	got2, out2 := s.ingest("pay.csv.gpg", again)
	if got2.Status != records.StatusRepeat || out2.ID != got.ID {
		t.Fatalf("re-encrypted: %s of %d, want a repeat of %d", got2.Status, out2.ID, got.ID)
	}
	if !bytes.Equal(s.result(got2.ID), first) {
		t.Error("the replay's result differs from the first's bytes")
	}
	// Other plaintext under the name: refused as today.
	got3, _ := s.ingest("pay.csv.pgp", s.seal(strings.Replace(pgpPayroll, "3100.50", "3200.50", 1)))
	if got3.Status != records.StatusKeyReuse {
		t.Fatalf("other plaintext under the name: %s, want key_reuse", got3.Status)
	}
	if r := s.Open(s.result(got3.ID), s.Platform); !strings.Contains(r, "idempotency_key_reuse") {
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
	stranger := s.NewKey("Stranger <x@stranger.example>", "ed25519")
	enc := func(extra ...string) []byte {
		return s.Run([]byte(pgpPayroll), append([]string{"--encrypt", "--recipient", s.Platform}, extra...)...)
	}
	tampered := s.seal(pgpPayroll, "--compress-algo", "none")
	tampered[len(tampered)-40] ^= 1
	signedOnly := s.Run([]byte(pgpPayroll), "--sign", "--local-user", s.PartnerKey)
	bomb := s.Run(bytes.Repeat([]byte("E001,2026-11,BASE,1.00,USD\n"), 200000), "--encrypt", "--sign", "--local-user", s.PartnerKey, "--recipient", s.Platform, "-z", "9")
	for i, c := range []struct {
		name string
		data []byte
		want normalize.Code
	}{
		{"pay.csv", []byte(pgpPayroll), normalize.CodePGPRequired},
		{"pay.csv.gpg", signedOnly, normalize.CodePGPRequired},
		{"pay.csv.gpg", s.Run([]byte(pgpPayroll), "--encrypt", "--sign", "--local-user", s.PartnerKey, "--recipient", stranger), normalize.CodePGPWrongKey},
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
			r := s.Open(s.result(got.ID), s.Platform)
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
	if r := s.Open(s.result(got.ID), s.Platform); strings.Count(r, ",created,") != 2 {
		t.Errorf("result:\n%s", r)
	}
	// Signed only, then altered: under accept the signature is verified
	// all the same, and the refusal goes back sealed.
	signed := s.Run([]byte(pgpPayroll), "--sign", "--local-user", s.PartnerKey, "--compress-algo", "none")
	forged := bytes.Replace(signed, []byte("4000.00"), []byte("9000.00"), 1)
	if bytes.Equal(forged, signed) {
		t.Fatal("the amount is not in the signed message's clear bytes")
	}
	got, out = s.ingest("forged.csv.gpg", forged)
	if r := s.Open(s.result(got.ID), s.Platform); out.Counts["rejected"] != 1 || !strings.Contains(r, string(normalize.CodePGPSignatureInvalid)) {
		t.Errorf("forged signed file under accept: %v\n%s", out.Counts, r)
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
	old := s.Platform
	toOld := s.seal(pgpPayroll)
	newer := s.AddPlatformKey(false)
	// Both decrypt; the newest signs.
	got, out := s.ingest("old.csv.gpg", toOld)
	if out.Counts["created"] != 2 {
		t.Fatalf("encrypted to the older key: %v", out.Counts)
	}
	s.Open(s.result(got.ID), newer)
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
	if r := s.Open(s.result(got.ID), newer); !strings.Contains(r, string(normalize.CodePGPWrongKey)) || !strings.Contains(r, newer) {
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
	get := func() (*http.Response, []byte) { return authGet(t, api.URL+loc+"/result.csv", tok) }
	r, first := get()
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != intake.PGPContentType ||
		!strings.Contains(r.Header.Get("Content-Disposition"), "pay.result.csv.pgp") {
		t.Fatalf("GET result: %d %v", r.StatusCode, r.Header)
	}
	if p := s.Open(first, s.Platform); strings.Count(p, ",created,") != 2 {
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

// TestPGPReviewReport: a held change of a partner whose files go sealed,
// decided by a reviewer: its review report is sealed in the decision's
// transaction, listed as NAME.review.csv.pgp, and every read gives the
// same bytes, which gpg opens.
func TestPGPReviewReport(t *testing.T) {
	ctx := context.Background()
	st, err := records.Open(ctx, pgtest.New(t), records.Options{SecretKeys: pgtest.TestSecretKeys, Sealer: intake.SealerOf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	in := intake.New(st, nil)
	s := newPGPSide(t, st, in, "acme", records.PGPRequire, "ed25519", false)
	if _, out := s.ingest("jan.csv.gpg", s.seal(pgpPayroll)); out.Counts["created"] != 2 {
		t.Fatalf("first file: %v", out.Counts)
	}
	if _, err := st.LockPeriod(ctx, "acme", "2026-11", records.LockApproved, "lead"); err != nil {
		t.Fatal(err)
	}
	got, out := s.ingest("jan-fix.csv.gpg", s.seal(strings.Replace(pgpPayroll, "3100.50", "3300.50", 1)))
	if out.Counts["held"] != 1 {
		t.Fatalf("correction: %v", out.Counts)
	}
	xs, err := st.Exceptions(ctx, records.ExceptionFilter{Partner: "acme", Status: records.ExceptionOpen})
	if err != nil || len(xs) != 1 {
		t.Fatalf("exceptions: %v %v", xs, err)
	}
	if _, err := st.Decide(ctx, records.Decision{ExceptionID: xs[0].ID, Approve: true, Reviewer: "lead", Note: "confirmed"}); err != nil {
		t.Fatal(err)
	}
	rrs, err := st.ReviewReports(ctx, "acme")
	if err != nil || len(rrs) != 1 || rrs[0].Name != "jan-fix.review.csv.pgp" || !rrs[0].Sealed || rrs[0].EnvelopeID != got.ID {
		t.Fatalf("review reports: %+v %v", rrs, err)
	}
	var first, again bytes.Buffer
	if err := st.ReviewReport(ctx, got.ID, &first); err != nil {
		t.Fatal(err)
	}
	if err := st.ReviewReport(ctx, got.ID, &again); err != nil || !bytes.Equal(first.Bytes(), again.Bytes()) || int64(first.Len()) != rrs[0].Size {
		t.Errorf("second read differs or size %d is not the listed %d: %v", first.Len(), rrs[0].Size, err)
	}
	if r := s.Open(first.Bytes(), s.Platform); !strings.Contains(r, ",approved,") || !strings.Contains(r, "confirmed") {
		t.Errorf("decrypted review report:\n%s", r)
	}
	// Over HTTP: the same bytes, as application/pgp-encrypted.
	api := httptest.NewServer(httpapi.New(in, partnerauth.New(st), httpapi.Config{SpoolDir: t.TempDir()}).Handler())
	t.Cleanup(api.Close)
	tok, err := st.IssueAPIToken(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	resp, body := authGet(t, fmt.Sprintf("%s/v1/submissions/%d/review.csv", api.URL, got.ID), tok)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != intake.PGPContentType ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "jan-fix.review.csv.pgp") || !bytes.Equal(body, first.Bytes()) {
		t.Errorf("GET review.csv: %d %v, same bytes %v", resp.StatusCode, resp.Header, bytes.Equal(body, first.Bytes()))
	}
}

// authGet GETs url with a partner's API token and reads the whole body.
func authGet(t *testing.T, url, tok string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r, b
}
