package review

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/payintake/payintake/records"
)

// heldCodes gives partner acme a profile holding rows of codes it does not
// map, and sends a file with three such rows (XMAS twice, GIFT once) of
// the open period 2024-02; it returns their exceptions in file order.
func heldCodes(t *testing.T, f *fixture) []records.Exception {
	t.Helper()
	pr := records.PartnerProfile{Components: map[string]string{"REG": "BASE"}, UnknownComponent: "hold"}
	if _, err := f.store.SetPartnerProfile(f.ctx, "acme", "(test)", pr, records.PartnerUpdate{}, "ops", records.ViaCLI); err != nil {
		t.Fatal(err)
	}
	env := f.ingest("acme", "feb.csv", header+
		"E1,2024-02,XMAS,10.00,USD\n"+
		"E2,2024-02,XMAS,20.00,USD\n"+
		"E3,2024-02,GIFT,30.00,USD\n")
	if env.Counts["held"] != 3 {
		t.Fatalf("feb.csv counts = %v, want 3 held", env.Counts)
	}
	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: "acme", Status: "open", Code: "unknown_component"})
	if err != nil || len(xs) != 3 || xs[0].PartnerCode != "XMAS" || xs[2].PartnerCode != "GIFT" {
		t.Fatalf("exceptions %+v %v", xs, err)
	}
	return xs
}

// TestAPIApproveHeldCode: approving a row held for its code needs
// as_component (422 component without it, and for any other exception);
// with it the row is applied with that component, as the answer says; a
// bulk approval gives every matching row the component.
func TestAPIApproveHeldCode(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	xs := heldCodes(t, f)
	approve := func(id int64) string { return fmt.Sprintf("%s/v1/review/exceptions/%d/approve", ts.URL, id) }
	wantProblem(t, call(t, "POST", approve(xs[0].ID), basic("alice"), `{"note": "ok"}`), 422, "component", "approve it with the component the code means")
	wantProblem(t, call(t, "POST", approve(f.e1.ID), basic("alice"), `{"as_component": "BASE"}`), 422, "component", "not held for its component code")
	wantProblem(t, call(t, "POST", fmt.Sprintf("%s/v1/review/exceptions/%d/reject", ts.URL, xs[0].ID), basic("alice"), `{"as_component": "BASE"}`), 422, "component", "reject without one")
	if n := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open'`); n != 6 {
		t.Fatalf("%d open exceptions after the refusals, want 6", n)
	}
	r := call(t, "POST", approve(xs[0].ID), basic("alice"), `{"as_component": "bonus", "note": "Christmas bonus"}`)
	if r.status != 200 || r.body["status"] != "approved" || r.body["component"] != "BONUS" || r.body["partner_code"] != "XMAS" || r.body["code"] != "unknown_component" {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}
	if rec, err := f.store.FindRecord(f.ctx, "acme", "E1", "2024-02", "BONUS"); err != nil || rec.Amount != "10.00" {
		t.Fatalf("E1's BONUS record %+v %v", rec, err)
	}
	// Bulk: GIFT as BONUS, with the code as the component filter.
	bulk := ts.URL + "/v1/review/bulk/approve"
	r = call(t, "POST", bulk, basic("alice"), `{"partner": "acme", "code": "unknown_component", "component": "GIFT", "as_component": "BONUS"}`)
	if r.status != 200 || r.body["decided"] != float64(1) || len(r.body["refused"].([]any)) != 0 {
		t.Fatalf("bulk approve: %d %s", r.status, r.raw)
	}
	// Without as_component, the held row is left open, refused for it.
	r = call(t, "POST", bulk, basic("alice"), `{"partner": "acme", "code": "unknown_component"}`)
	refused, _ := r.body["refused"].([]any)
	if r.status != 200 || r.body["decided"] != float64(0) || len(refused) != 1 || !strings.Contains(fmt.Sprint(refused[0]), "reason:component") {
		t.Fatalf("bulk approve without as_component: %d %s", r.status, r.raw)
	}
	// In a closed period the component holds the row again: left open,
	// reported as held, now period_locked.
	if _, err := f.store.LockPeriod(f.ctx, "acme", "2024-02", records.LockApproved, "lead"); err != nil {
		t.Fatal(err)
	}
	r = call(t, "POST", bulk, basic("alice"), `{"partner": "acme", "code": "unknown_component", "as_component": "BONUS"}`)
	refused, _ = r.body["refused"].([]any)
	if r.status != 200 || r.body["decided"] != float64(0) || len(refused) != 1 || !strings.Contains(fmt.Sprint(refused[0]), "reason:held") ||
		!strings.Contains(fmt.Sprint(refused[0]), "held again (period_locked)") {
		t.Fatalf("bulk approve into a closed period: %d %s", r.status, r.raw)
	}
	if d := f.exception(xs[1].ID); d.Status != "open" || d.Code != "period_locked" || d.Component != "BONUS" || d.PartnerCode != "XMAS" {
		t.Fatalf("held again: %+v", d)
	}
	c := newConsole(t, ts.URL)
	c.login("alice", testPassword)
	if _, _, page := c.do("GET", fmt.Sprintf("/review/exceptions/%d", xs[1].ID), nil, nil); !strings.Contains(page, "sent as code <b>XMAS</b>") || strings.Contains(page, `name="as_component"`) {
		t.Errorf("the page of the row held again does not show it as a closed period's, sent as XMAS:\n%s", page)
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE via = 'api' AND action = 'component' AND actor = 'alice'`); n != 3 {
		t.Fatalf("%d component decisions audited, want 3", n)
	}
}

// TestConsoleApproveHeldCode: the exception page of a row held for its
// code asks for the component; approving without one shows why (422)
// and decides nothing; with one, the row is applied.
func TestConsoleApproveHeldCode(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f)
	xs := heldCodes(t, f)
	c := newConsole(t, ts.URL)
	if st := c.login("alice", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}
	page := fmt.Sprintf("/review/exceptions/%d", xs[1].ID)
	_, _, body := c.do("GET", page, nil, nil)
	if !strings.Contains(body, `name="as_component"`) || !strings.Contains(body, "Component code <b>XMAS</b> means") {
		t.Fatalf("the page does not ask for the component:\n%s", body)
	}
	tok := csrfRE.FindStringSubmatch(body)[1]
	st, _, body := c.do("POST", page+"/decide", url.Values{"action": {"approve"}, "csrf": {tok}}, nil)
	if st != 422 || !strings.Contains(body, "approve it with the component the code means") {
		t.Fatalf("approve without a component: %d\n%s", st, body)
	}
	if d := f.exception(xs[1].ID); d.Status != "open" {
		t.Fatalf("a refused approval decided: %+v", d)
	}
	st, h, _ := c.do("POST", page+"/decide", url.Values{"action": {"approve"}, "csrf": {tok}, "as_component": {"OVERTIME"}}, nil)
	if st != 303 || h.Get("Location") != page+"?decided=1" {
		t.Fatalf("approve: %d %s", st, h.Get("Location"))
	}
	if d := f.exception(xs[1].ID); d.Status != "approved" || d.Component != "OVERTIME" || d.Record == nil || d.Record.Amount != "20.00" {
		t.Fatalf("after approve: %+v", d)
	}
}

// TestConsolePreviewHeldCode: the console's preview shows a row of a code
// the profile does not map, under hold, as held unknown_component with
// the message processing gives it; a code reviewers gave a component is
// shown read as it.
func TestConsolePreviewHeldCode(t *testing.T) {
	f := newFixture(t)
	xs := heldCodes(t, f)
	if _, err := f.store.Decide(f.ctx, records.Decision{ExceptionID: xs[2].ID, Approve: true, Reviewer: "lead", AsComponent: "BONUS"}); err != nil {
		t.Fatal(err)
	}
	ts := serve(t, f)
	c := newConsole(t, ts.URL)
	if st := c.login("alice", testPassword); st != 303 {
		t.Fatalf("login: %d", st)
	}
	_, _, form := c.do("GET", "/review/preview", nil, nil)
	st, body := c.upload("acme", "sample.csv", header+"E5,2024-03,XMAS,1.00,USD\nE5,2024-03,GIFT,2.00,USD\n", csrfRE.FindStringSubmatch(form)[1])
	if st != 200 {
		t.Fatalf("preview: %d\n%s", st, body)
	}
	for _, want := range []string{`<tr data-outcome="held">`, "<td>unknown_component</td>", "<td>XMAS</td>",
		"component code &#34;XMAS&#34; has no mapping in partner profile acme (version 1)", "do not resend it",
		`<tr data-outcome="created">`, "<td>BONUS (GIFT)</td>"} {
		if !strings.Contains(body, want) {
			t.Errorf("preview page lacks %q:\n%s", want, body)
		}
	}
}
