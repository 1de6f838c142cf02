package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/payintake/payintake/records"
)

// TestReviewReport: GET /v1/submissions/{id}/review.csv is 409 while rows
// are held, then the stored review report (the bytes of NAME.review.csv),
// and 404 for another partner.
func TestReviewReport(t *testing.T) {
	e := newEnv(t, Config{})
	wantStatus(t, e.submit("acme", "k1", "march.csv", csvRows("E1,2026-03,BASE,10.00,USD")), 201)
	if _, err := e.st.LockPeriod(e.ctx, "acme", "2026-03", records.LockPaid, "tester"); err != nil {
		t.Fatal(err)
	}
	r := e.submit("acme", "k2", "late.csv", csvRows("E1,2026-03,BASE,11.00,USD"))
	wantStatus(t, r, 201)
	id := int64(r.json(t)["id"].(float64))
	path := fmt.Sprintf("/v1/submissions/%d/review.csv", id)
	wantProblem(t, e.get("acme", path), 409, "not_ready")
	var x int64
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT id FROM exceptions WHERE envelope_id = $1`, id).Scan(&x); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Decide(e.ctx, records.Decision{ExceptionID: x, Approve: true, Reviewer: "alice", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	got := e.get("acme", path)
	wantStatus(t, got, 200)
	var want strings.Builder
	if err := e.st.ReviewReport(e.ctx, id, &want); err != nil {
		t.Fatal(err)
	}
	if string(got.body) != want.String() || !strings.Contains(want.String(), ",approved,E1,") ||
		!strings.Contains(got.header.Get("Content-Disposition"), "late.review.csv") {
		t.Fatalf("review.csv: %s\n%s, want\n%s", got.header, got.body, want.String())
	}
	wantStatus(t, e.get("other", path), 404)
}
