package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/payintake/payintake/records"
)

// A held row's message is written in one place (apply's classify SQL) for
// files and webhooks; the two doors name the row differently ("this row",
// "the change") and otherwise say the same, word for word as before the
// webhook's own copies were folded into it.
func TestHeldMessagesOfFilesAndWebhooks(t *testing.T) {
	e := newEnv(t, Config{})
	wantOutcome(t, e.hook("acme", "m1", change("l1", 1, "E001", "100.00")), "created", "", 1)
	if _, err := e.st.LockPeriod(e.ctx, "acme", "2026-03", records.LockApproved, "tester"); err != nil {
		t.Fatal(err)
	}
	const (
		recordLocked = "this record is locked (approved), so the change was not applied; it is held as an exception for a reviewer: do not resend it"
		periodFile   = "pay period 2026-03 is closed (approved), so this row was not applied; it is held as an exception for a reviewer: do not resend it"
		periodHook   = "pay period 2026-03 is closed (approved), so the change was not applied; it is held as an exception for a reviewer: do not resend it"
	)
	for _, c := range []struct {
		id, body, code, want string
		version              int
	}{
		{"m2", change("l1", 2, "E001", "150.00"), "record_locked", recordLocked, 2},
		{"m3", change("l2", 1, "E002", "50.00"), "period_locked", periodHook, 1},
	} {
		m := wantOutcome(t, e.hook("acme", c.id, c.body), "held", c.code, c.version)
		if m["message"] != c.want {
			t.Errorf("webhook %s: message %q, want %q", c.id, m["message"], c.want)
		}
	}
	r := e.submit("acme", "f1", "f1.csv", csvHeader+"E001,2026-03,BASE,175.00,USD\nE003,2026-03,BASE,60.00,USD\n")
	wantStatus(t, r, http.StatusCreated)
	rows := e.get("acme", fmt.Sprintf("/v1/submissions/%v/rows", r.json(t)["id"]))
	var page struct{ Rows []records.ResultRow }
	if err := json.Unmarshal(rows.body, &page); err != nil || len(page.Rows) != 2 {
		t.Fatalf("rows %s: %v", rows.body, err)
	}
	for i, want := range []string{recordLocked, periodFile} {
		if got := page.Rows[i]; got.Outcome != records.OutcomeHeld || got.Message != want {
			t.Errorf("file row %d: %s %q, want held %q", i+1, got.Outcome, got.Message, want)
		}
	}
}
