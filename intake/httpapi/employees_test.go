package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/payintake/payintake/records"
)

// TestWebhookUnknownEmployee: a webhook for an employee_ref with no mapping
// gets what a file's row gets under each --unknown-employee policy.
func TestWebhookUnknownEmployee(t *testing.T) {
	sum := sha256.Sum256([]byte("acme:E404"))
	derived := "emp_" + hex.EncodeToString(sum[:])[:20]
	cases := map[string]struct {
		policy, outcome, code string
		mapped                string // E404's employee_id afterwards, "" for none
	}{
		"create": {records.UnknownCreate, "created", "", derived},
		"reject": {records.UnknownReject, "rejected", "unknown_employee", ""},
		"hold":   {records.UnknownHold, "held", "unknown_employee", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Config{})
			policy := tc.policy
			if err := e.st.UpdatePartner(e.ctx, "acme", records.PartnerUpdate{UnknownEmployee: &policy}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.st.ImportEmployees(e.ctx, "acme", []records.EmployeeMapping{{Line: 2, EmployeeRef: "E001", EmployeeID: "W-1"}}); err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, e.hook("acme", "m1", change("l1", 1, "E001", "100.00")), "created", "", 1)
			if m := wantOutcome(t, e.hook("acme", "m1b", change("l1", 2, "E001", "101.00")), "updated", "", 2); m["employee_id"] != "W-1" {
				t.Errorf("answer for an onboarded employee has employee_id %v, want W-1", m["employee_id"])
			}
			m := wantOutcome(t, e.hook("acme", "m2", change("l2", 1, "E404", "50.00")), tc.outcome, tc.code, 1)
			if want := map[string]any{"created": derived, "held": derived, "rejected": nil}[tc.outcome]; m["employee_id"] != want {
				t.Errorf("answer has employee_id %v, want %v", m["employee_id"], want)
			}
			if tc.code != "" && !strings.Contains(m["message"].(string), "E404 is not onboarded") {
				t.Errorf("message %q does not say what is wrong", m["message"])
			}
			var mapped string
			_ = e.st.Pool().QueryRow(e.ctx, `SELECT employee_id FROM employees WHERE partner_id = 'acme' AND employee_ref = 'E404'`).Scan(&mapped)
			if mapped != tc.mapped {
				t.Errorf("E404 mapped to %q, want %q", mapped, tc.mapped)
			}
			// A redelivery gets the first answer.
			if r := e.hook("acme", "m2", change("l2", 1, "E404", "50.00")); !r.replayed() {
				t.Error("redelivery not replayed")
			}
			switch tc.policy {
			case records.UnknownReject:
				// Nothing was kept: once onboarded, the same version is applied.
				if _, err := e.st.ImportEmployees(e.ctx, "acme", []records.EmployeeMapping{{Line: 2, EmployeeRef: "E404", EmployeeID: "W-404"}}); err != nil {
					t.Fatal(err)
				}
				wantOutcome(t, e.hook("acme", "m3", change("l2", 1, "E404", "50.00")), "created", "", 1)
			case records.UnknownHold:
				x, err := e.st.Exception(e.ctx, int64(m["exception_id"].(float64)))
				if err != nil || x.Code != "unknown_employee" || x.EmployeeID != derived {
					t.Fatalf("exception %+v, %v; want unknown_employee with employee_id %s", x, err, derived)
				}
				if _, err := e.st.Decide(e.ctx, records.Decision{ExceptionID: x.ID, Approve: true, Reviewer: "rita"}); err != nil {
					t.Fatal(err)
				}
				if r := e.record("acme", "E404", "2026-03", "BASE"); r.Amount != "50.00" {
					t.Errorf("approved record %+v", r)
				}
				if n := e.count(`SELECT count(*) FROM employees WHERE employee_ref = 'E404' AND employee_id = $1`, derived); n != 1 {
					t.Errorf("approval did not onboard E404 with %s", derived)
				}
			}
		})
	}
}
