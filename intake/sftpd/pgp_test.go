package sftpd_test

import (
	"strings"
	"testing"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgp/gpgtest"
	"github.com/payintake/payintake/records"
)

const pgpPayroll = "employee_ref,pay_period,component,amount,currency\n" +
	"E001,2026-11,BASE,4000.00,USD\n" +
	"E002,2026-11,BASE,3100.50,USD\n"

// TestPGPOverSFTP: a partner that must encrypt uploads gpg's output to
// /inbox and reads NAME.result.csv.pgp, which gpg decrypts, verifying the
// platform's signature; a plain upload is refused with a sealed result.
// Metrics and the receipt's log line name the keys by fingerprint only.
func TestPGPOverSFTP(t *testing.T) {
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	x := gpgtest.NewExchange(t, z.store, "acme", records.PGPRequire, "ed25519", false)
	c := z.login("acme", key)
	put(t, c, "/inbox/pay.csv.gpg", x.Seal([]byte(pgpPayroll)))
	if p := x.Open(waitResult(t, c, "pay.result.csv.pgp"), x.Platform); strings.Count(p, ",created,") != 2 {
		t.Errorf("result over SFTP:\n%s", p)
	}
	put(t, c, "/inbox/plain.csv", []byte(pgpPayroll))
	if p := x.Open(waitResult(t, c, "plain.result.csv.pgp"), x.Platform); !strings.Contains(p, string(normalize.CodePGPRequired)) {
		t.Errorf("plain upload under require:\n%s", p)
	}
	if n := z.metric("payintake_pgp_files_total", "result=ok", "platform_key="+x.Platform, "signer="+x.PartnerKey); n != 1 {
		t.Errorf("payintake_pgp_files_total ok = %v, want 1", n)
	}
	if n := z.metric("payintake_pgp_files_total", "result=pgp_required", "platform_key=none", "signer=none"); n != 1 {
		t.Errorf("payintake_pgp_files_total pgp_required = %v, want 1", n)
	}
	logs := z.logs.String()
	if !strings.Contains(logs, "pgp.platform_key="+x.Platform) || !strings.Contains(logs, "pgp.signer="+x.PartnerKey) || !strings.Contains(logs, "pgp.refused=pgp_required") {
		t.Errorf("the receipt's log lines do not name the keys and the refusal:\n%s", logs)
	}
	if strings.Contains(logs, "BEGIN PGP") {
		t.Error("key material in the logs")
	}
}
