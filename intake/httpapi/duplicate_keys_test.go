package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A hostile sender repeats a JSON member hoping one reader takes the first
// value and another the last (a webhook with "amount" twice was applied
// with the last; a replay with "rows" and "ROWS" applied the second set,
// encoding/json matching names in any case). Every webhook and leg replay
// body naming a member twice, exactly or in another case, is refused 422
// duplicate_key naming it; nothing is applied.
func TestHostileDuplicateJSONKeys(t *testing.T) {
	e := newEnv(t, Config{})
	hooks := []struct{ body, field string }{
		{`{"entity_id":"x","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD","amount":"9999.00"}`, "amount"},
		{`{"entity_id":"x","version":1,"version":999,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "version"},
		{`{"entity_id":"x","entity_id":"y","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "entity_id"},
		{`{"entity_id":"x","version":1,"employee_ref":"E1","employee_ref":"E2","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "employee_ref"},
		{`{"entity_id":"x","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","am\u006funt":"1.00","currency":"USD","amount":"9999.00"}`, "amount"}, // escaped spelling
		{`{"entity_id":"x","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD","extra":{"a":1,"a":2}}`, "extra.a"},
		{`{"entity_id":"x","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD","AMOUNT":"9999.00"}`, "AMOUNT"},
		{`{"entity_id":"x","version":1,"Version":999,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "Version"},
		{`{"entity_id":"x","Entity_ID":"y","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}`, "Entity_ID"},
	}
	refused := 0
	for i, h := range hooks {
		r := e.hook("acme", fmt.Sprintf("dup_%d", i), h.body)
		p := wantProblem(t, r, http.StatusUnprocessableEntity, "duplicate_key")
		if p["field"] != h.field || p["quarantined"] != true || !strings.Contains(p["detail"].(string), fmt.Sprintf("%q", h.field)) {
			t.Errorf("webhook %d: %s, want field %s, quarantined", i, r.body, h.field)
			continue
		}
		refused++
	}
	if n := e.count(`SELECT count(*) FROM records`); n != 0 {
		t.Fatalf("%d records written by bodies with a repeated member", n)
	}
	// The same change, each member once, is applied: the refusals were about the repeat.
	wantStatus(t, e.hook("acme", "ok_1", change("x", 1, "E1", "1.00")), http.StatusOK)
	if got := e.record("acme", "E1", "2026-03", "BASE"); got.Amount != "1.00" {
		t.Fatalf("record %+v", got)
	}

	id := submissionID(t, e.submit("acme", "run-1", "march.csv", csvRows("E001,2026-03,BASE,abc,USD")))
	replays := []struct{ body, field string }{
		{`{"rows":[{"row":1,"employee_ref":"E001","pay_period":"2026-03","component":"BASE","amount":"1.00","amount":"9999.00","currency":"USD"}]}`, "rows[0].amount"},
		{`{"rows":[{"row":1,"row":2,"employee_ref":"E001","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}]}`, "rows[0].row"},
		{`{"rows":[],"rows":[{"row":1,"employee_ref":"E001","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}]}`, "rows"},
		{`{"rows":[{"row":1,"employee_ref":"E001","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD"}],"ROWS":[{"row":1,"employee_ref":"E001","pay_period":"2026-03","component":"BASE","amount":"9999.00","currency":"USD"}]}`, "ROWS"},
		{`{"rows":[{"row":1,"employee_ref":"E001","pay_period":"2026-03","component":"BASE","amount":"1.00","Amount":"9999.00","currency":"USD"}]}`, "rows[0].Amount"},
	}
	for i, rp := range replays {
		r := e.replay("acme", id, fmt.Sprintf("fix-%d", i), rp.body)
		p := wantProblem(t, r, http.StatusUnprocessableEntity, "duplicate_key")
		if p["field"] != rp.field || !strings.Contains(p["detail"].(string), fmt.Sprintf("%q", rp.field)) {
			t.Errorf("replay %d: %s, want field %s", i, r.body, rp.field)
			continue
		}
		refused++
	}
	if n := e.count(`SELECT count(*) FROM records WHERE employee_ref = 'E001'`); n != 0 {
		t.Fatalf("a replay with a repeated member wrote a record")
	}
	// A member no body takes is refused too, naming it (a misspelt
	// member is never silently dropped).
	r := e.hook("acme", "unknown_1", `{"entity_id":"y","version":1,"employee_ref":"E1","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD","amout":"2.00"}`)
	if p := wantProblem(t, r, http.StatusUnprocessableEntity, "unknown_member"); p["field"] != "amout" {
		t.Errorf("unknown webhook member: %s", r.body)
	}
	r = e.replay("acme", id, "fix-unknown", `{"rows":[{"row":1,"employee_ref":"E001","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD","Currency":"EUR"}]}`)
	wantProblem(t, r, http.StatusUnprocessableEntity, "duplicate_key")
	r = e.replay("acme", id, "fix-unknown-2", `{"rows":[{"row":1,"employee_ref":"E001","pay_period":"2026-03","component":"BASE","amount":"1.00","currency":"USD","note":"x"}]}`)
	if p := wantProblem(t, r, http.StatusUnprocessableEntity, "unknown_member"); p["field"] != "rows[0].note" {
		t.Errorf("unknown replay member: %s", r.body)
	}
	if n := e.count(`SELECT count(*) FROM records WHERE employee_ref IN ('E001', 'E1') AND amount <> 1.00`); n != 0 {
		t.Fatalf("a refused body wrote a record")
	}
	t.Logf("SUMMARY duplicate-keys: %d of %d bodies with a repeated member refused 422 duplicate_key naming it (%d webhooks, quarantined; %d leg replays); 0 records written",
		refused, len(hooks)+len(replays), len(hooks), len(replays))
}
