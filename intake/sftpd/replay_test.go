package sftpd_test

import (
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/payintake/payintake/records"
)

// Over SFTP: NAME.replay.csv next to NAME's result replays its rejected
// rows, with the same leg keys and outcomes as the HTTP replay, and its
// result is /results/NAME.replay.result.csv.
func TestSFTPReplayFile(t *testing.T) {
	t.Parallel()
	z := newDropZone(t, zoneOpts{})
	key := z.partner("acme")
	c := z.login("acme", key)
	hdr := "employee_ref,pay_period,component,amount,currency\n"
	put(t, c, "/inbox/march.csv", []byte(hdr+"E1,2026-03,BASE,10.00,USD\nE2,2026-03,BASE,12.345,USD\nE3,2026-03,BASE,x,USD\n"))
	original := waitResult(t, c, "march.result.csv")
	if !strings.Contains(string(original), "too_many_decimals") {
		t.Fatalf("original result:\n%s", original)
	}

	put(t, c, "/inbox/march.replay.csv", []byte("row,employee_ref,pay_period,component,amount,currency\n2,E2,2026-03,BASE,12.34,USD\n3,E3,2026-03,BASE,y,USD\n"))
	got := string(waitResult(t, c, "march.replay.result.csv"))
	want := records.ResultHeader + "3,2,created,E2,2026-03,BASE,12.34,USD,,,\n"
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "4,3,rejected,E3,2026-03,BASE,y,USD,invalid_amount,amount,") {
		t.Fatalf("replay result:\n%s\nwant it to start with:\n%s", got, want)
	}
	if n := z.count(`SELECT count(*) FROM records WHERE partner_id = 'acme' AND employee_ref = 'E2' AND amount = 12.34`); n != 1 {
		t.Fatalf("E2 not applied: %d", n)
	}
	// The leg key: HMAC-SHA256(submission key, "2"), as openssl computes it.
	out, err := exec.Command("sh", "-c", "printf 2 | openssl dgst -sha256 -hmac march.csv").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if n := z.count(fmt.Sprintf(`SELECT count(*) FROM replay_legs WHERE row_no = 2 AND settled AND leg_key = '\x%s'::bytea`, f[len(f)-1])); n != 1 {
		t.Fatalf("no settled leg with openssl's key %s", f[len(f)-1])
	}
	if hex.EncodeToString(records.LegKey("march.csv", 2)) != f[len(f)-1] {
		t.Fatal("LegKey disagrees with openssl")
	}

	// The original's result over SFTP is unchanged.
	if again := waitResult(t, c, "march.result.csv"); string(again) != string(original) {
		t.Fatalf("original result changed:\n%s", again)
	}
	// A second replay file naming a settled leg and a row that was created:
	// refused whole, nothing applied.
	put(t, c, "/inbox/april.replay.csv", []byte("row,employee_ref,pay_period,component,amount,currency\n1,E1,2026-03,BASE,11.00,USD\n"))
	if got := string(waitResult(t, c, "april.replay.result.csv")); !strings.Contains(got, "replay_target_missing") {
		t.Fatalf("replay of an unknown name:\n%s", got)
	}
	put(t, c, "/inbox/march.replay-2.txt", []byte("row,employee_ref,pay_period,component,amount,currency\n1,E1,2026-03,BASE,11.00,USD\n2,E2,2026-03,BASE,50.00,USD\n"))
	if got := string(waitResult(t, c, "march.replay-2.result.csv")); !strings.Contains(got, "row_not_replayable") || !strings.Contains(got, "row 1 was created") {
		t.Fatalf("replay of a created row:\n%s", got)
	}
	if n := z.count(`SELECT count(*) FROM records WHERE partner_id = 'acme' AND amount IN (11.00, 50.00)`); n != 0 {
		t.Fatalf("a refused replay file applied %d rows", n)
	}
}
