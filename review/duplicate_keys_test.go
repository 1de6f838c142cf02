package review

import (
	"fmt"
	"testing"
)

// The review API's JSON bodies: a member given twice, exactly or in another
// case, is refused 422 duplicate_key, naming it, and nothing is decided
// (before: the last value won, so `{"dry_run": true, "dry_run": false}` and
// `{"dry_run": true, "DRY_RUN": false}` decided for real).
func TestHostileDuplicateJSONKeysReview(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	bodies := []struct{ path, body, field string }{
		{"/v1/review/bulk/approve", `{"partner": "acme", "dry_run": true, "dry_run": false}`, "dry_run"},
		{"/v1/review/bulk/reject", `{"partner": "globex", "partner": "acme"}`, "partner"},
		{fmt.Sprintf("/v1/review/exceptions/%d/approve", f.e1.ID), `{"note": "ok", "note": "ticket 9"}`, "note"},
		{"/v1/review/bulk/approve", `{"partner": "acme", "dry_run": true, "DRY_RUN": false}`, "DRY_RUN"},
		{"/v1/review/bulk/reject", `{"partner": "acme", "file": "none.csv", "File": ""}`, "File"},
		{"/v1/review/bulk/approve", `{"Partner": "globex", "partner": "acme", "dry_run": true}`, "partner"},
		{fmt.Sprintf("/v1/review/exceptions/%d/reject", f.e1.ID), `{"note": "ok", "NOTE": "ticket 9"}`, "NOTE"},
	}
	for _, b := range bodies {
		r := call(t, "POST", ts.URL+b.path, basic("alice"), b.body)
		wantProblem(t, r, 422, "duplicate_key", fmt.Sprintf("%q", b.field))
		if r.body["field"] != b.field {
			t.Errorf("%s: field %v, want %s", b.path, r.body["field"], b.field)
		}
	}
	open := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open'`)
	if d := f.count(`SELECT count(*) FROM review_audit WHERE action IN ('approve', 'reject')`); d != 0 || open != 3 {
		t.Fatalf("%d exceptions open, want 3: a body with a repeated member decided something", open)
	}
	t.Logf("SUMMARY duplicate-keys-review: %d review API bodies with a repeated member refused 422; %d of 3 exceptions still open", len(bodies), open)
}
