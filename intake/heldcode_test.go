package intake_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// holdProfile maps REG and OT, and holds a row of any other code for a
// reviewer (unknown_component: hold).
func setHoldProfile(f *fixture) {
	f.t.Helper()
	pr := records.PartnerProfile{Components: map[string]string{"REG": "BASE", "OT": "OVERTIME"}, UnknownComponent: "hold"}
	if _, err := f.store.SetPartnerProfile(f.ctx, f.partner, "(test)", pr, records.PartnerUpdate{}, "tester", records.ViaCLI); err != nil {
		f.t.Fatal(err)
	}
}

const heldHead = "employee_ref,pay_period,component,amount,currency\n"

// heldRow finds the result line of employee ref.
func heldRow(t *testing.T, rows []map[string]string, ref string) map[string]string {
	t.Helper()
	for _, r := range rows {
		if r["employee_ref"] == ref {
			return r
		}
	}
	t.Fatalf("no result line for %s in %v", ref, rows)
	return nil
}

// checkHeld: the row of ref is held for its code, echoed alone, with a
// message naming the code, the profile version and what happens next.
func checkHeld(t *testing.T, r map[string]string, code string) {
	t.Helper()
	if r["outcome"] != "held" || r["code"] != string(normalize.CodeUnknownComponent) || r["field"] != "component" || r["component"] != code {
		t.Errorf("line %v, want held unknown_component on component %s", r, code)
	}
	for _, want := range []string{`"` + code + `"`, "partner profile acme (version 1)", "held as an exception for a reviewer", "do not resend it"} {
		if !strings.Contains(r["message"], want) {
			t.Errorf("message %q lacks %q", r["message"], want)
		}
	}
}

// TestHeldCodeInEveryStrategy: a row whose code the profile does not map
// is held (nothing written to records for it, one exception keeping the
// partner's code) in a first file (read directly, which gives up and
// stages it), a resubmission (compared on its keys: the held row is read
// again and classified) and with every file staged whole; a repeat of the
// file gives the stored outcome and does nothing again. Both engines give
// the same result files, records and exceptions.
func TestHeldCodeInEveryStrategy(t *testing.T) {
	effects := map[bool][]string{}
	for _, stageWhole := range []bool{false, true} {
		f, c := resubmissionFixture(t, records.Partner{UnknownEmployee: records.UnknownReject}, stageWhole)
		setHoldProfile(f)
		first := heldHead + "E1,2026-11,REG,100.00,USD\nE2,2026-11,xmas,50.00,USD\n"
		_, out := f.ingest("pay-1.csv", first)
		rows := f.resultRows(out)
		if r := heldRow(t, rows, "E1"); r["outcome"] != "created" || r["component"] != "BASE (REG)" {
			t.Errorf("staged whole %v: E1 %v", stageWhole, r)
		}
		checkHeld(t, heldRow(t, rows, "E2"), "XMAS")
		if n := f.count(`SELECT count(*) FROM records`); n != 1 {
			t.Errorf("staged whole %v: %d records, want E1's only", stageWhole, n)
		}
		if n := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open' AND code = 'unknown_component'
			AND employee_ref = 'E2' AND component = 'XMAS' AND partner_code = 'XMAS' AND proposed ->> 'amount' = '50.00'`); n != 1 {
			t.Errorf("staged whole %v: %d open exceptions of E2's row, want 1", stageWhole, n)
		}
		// A repeat: the stored outcome, nothing done again.
		result := f.result(out)
		got, again := f.ingest("pay-1.csv", first)
		if got.Status != records.StatusRepeat || again.ID != out.ID || f.result(again) != result {
			t.Errorf("staged whole %v: repeat %s of %d, outcome %d", stageWhole, got.Status, got.RepeatOf, again.ID)
		}
		if n := f.count(`SELECT count(*) FROM exceptions`); n != 1 {
			t.Errorf("staged whole %v: %d exceptions after the repeat, want 1", stageWhole, n)
		}
		keysBefore := c.Keys.Load() - c.KeysUndone.Load()
		_, out = f.ingest("pay-2.csv", first+"E3,2026-11,XMAS,70.00,USD\n")
		rows = f.resultRows(out)
		if r := heldRow(t, rows, "E1"); r["outcome"] != "unchanged" {
			t.Errorf("staged whole %v: resubmitted E1 %v", stageWhole, r)
		}
		checkHeld(t, heldRow(t, rows, "E2"), "XMAS")
		checkHeld(t, heldRow(t, rows, "E3"), "XMAS")
		if out.Counts["held"] != 2 || out.Counts["unchanged"] != 1 {
			t.Errorf("staged whole %v: counts %v", stageWhole, out.Counts)
		}
		// E2's identical re-proposal keeps its exception; E3's opens one.
		if n := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open' AND code = 'unknown_component'`); n != 2 {
			t.Errorf("staged whole %v: %d open exceptions, want 2", stageWhole, n)
		}
		compared := c.Keys.Load() - c.KeysUndone.Load() - keysBefore
		if want := map[bool]int64{false: 1, true: 0}[stageWhole]; compared != want {
			t.Errorf("staged whole %v: the resubmission was compared on its keys %d time(s), want %d", stageWhole, compared, want)
		}
		e := applytest.Effects(t, f.store)
		effects[stageWhole] = []string{result, f.result(out), e["records"], e["exceptions"]}
	}
	for i, what := range []string{"first result", "second result", "records", "exceptions"} {
		if a, b := effects[false][i], effects[true][i]; a != b {
			t.Errorf("%s differ:\n%s\nstaged whole:\n%s", what, a, b)
		}
	}
}

// TestApproveHeldCode: a row held for its code is approved with the
// component the code means (refused without one): the record is created
// as the row read with that component, the decision audited, the review
// report says so, and the partner's resend of the row is unchanged; a row
// of another code is rejected; and a component that meets a locked
// record holds the row again as record_locked.
func TestApproveHeldCode(t *testing.T) {
	f, _ := resubmissionFixture(t, records.Partner{UnknownEmployee: records.UnknownReject}, false)
	setHoldProfile(f)
	// E2's row has every field, so the hash taken again at approval is
	// seen to be the one its resend is read with.
	file := "employee_ref,pay_period,component,amount,currency,hours,rate,pay_date\n" +
		"E1,2026-11,REG,100.00,USD,,,\nE2,2026-11,XMAS,50.00,USD,2.50,20.00,2026-11-30\nE3,2026-11,GIFT,7.00,USD,,,\n"
	_, out := f.ingest("pay-1.csv", file)
	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: f.partner, Code: normalize.CodeUnknownComponent})
	if err != nil || len(xs) != 2 {
		t.Fatalf("exceptions %v %v", xs, err)
	}
	xmas, gift := xs[0].ID, xs[1].ID

	_, err = f.store.Decide(f.ctx, records.Decision{ExceptionID: xmas, Approve: true, Reviewer: "rita"})
	if !errors.Is(err, records.ErrComponent) || !strings.Contains(err.Error(), "component") {
		t.Fatalf("approve without a component = %v, want a refusal naming the component", err)
	}
	if _, err := f.store.Decide(f.ctx, records.Decision{ExceptionID: gift, Approve: false, Reviewer: "rita", AsComponent: "BONUS"}); err == nil {
		t.Errorf("a rejection with a component was accepted")
	}
	if n := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open'`); n != 2 {
		t.Fatalf("%d open exceptions after the refusals, want 2", n)
	}
	x, err := f.store.Decide(f.ctx, records.Decision{ExceptionID: xmas, Approve: true, Reviewer: "rita", AsComponent: " bonus ", Via: records.ViaAPI})
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != records.ExceptionApproved || x.Component != "BONUS" {
		t.Errorf("approved exception = %+v", x)
	}
	if a := f.amount("E2", "2026-11", "BONUS"); a != "50.00" {
		t.Errorf("E2's BONUS record has amount %s", a)
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE exception_id = $1 AND actor = 'rita' AND via = 'api'
		AND action = 'component' AND detail LIKE '%XMAS is component BONUS%created%'`, xmas); n != 1 {
		t.Errorf("%d audit entries of the component, want 1", n)
	}
	if _, err := f.store.Decide(f.ctx, records.Decision{ExceptionID: gift, Reviewer: "rita", Note: "not ours"}); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM records WHERE employee_ref = 'E3'`); n != 0 {
		t.Errorf("the rejected row wrote %d records", n)
	}
	// The review report: the approved row with its component and code,
	// the rejected one as sent.
	var b bytes.Buffer
	if err := f.store.ReviewReport(f.ctx, out.ID, &b); err != nil {
		t.Fatal(err)
	}
	lines, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(lines) != 3 {
		t.Fatalf("review report %q: %v", b.String(), err)
	}
	if l := strings.Join(lines[1][:8], ","); l != "3,2,approved,E2,2026-11,BONUS (XMAS),50.00,USD" || !strings.Contains(lines[1][10], "code XMAS means BONUS") {
		t.Errorf("approved line %q", lines[1])
	}
	if l := strings.Join(lines[2][:9], ","); l != "4,3,rejected,E3,2026-11,GIFT,7.00,USD,rejected_by_reviewer" || !strings.Contains(lines[2][10], "GIFT") {
		t.Errorf("rejected line %q", lines[2])
	}
	// The partner sends the rows again: XMAS now reads as BONUS.
	_, out = f.ingest("pay-2.csv", file)
	rows := f.resultRows(out)
	if r := heldRow(t, rows, "E2"); r["outcome"] != "unchanged" || r["component"] != "BONUS (XMAS)" {
		t.Errorf("E2 resent: %v, want unchanged BONUS (XMAS)", r)
	}
	checkHeld(t, heldRow(t, rows, "E3"), "GIFT")

	// A code whose component meets a locked record: held again as
	// record_locked, the same exception, for a reviewer.
	if _, err := f.store.LockPeriod(f.ctx, f.partner, "2026-11", records.LockApproved, "ops"); err != nil {
		t.Fatal(err)
	}
	_, out = f.ingest("pay-3.csv", heldHead+"E1,2026-11,TIP,5.00,USD\n")
	checkHeld(t, heldRow(t, f.resultRows(out), "E1"), "TIP")
	xs, err = f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: f.partner, Status: records.ExceptionOpen, Employee: "E1"})
	if err != nil || len(xs) != 1 {
		t.Fatalf("exceptions %v %v", xs, err)
	}
	x, err = f.store.Decide(f.ctx, records.Decision{ExceptionID: xs[0].ID, Approve: true, Reviewer: "rita", AsComponent: "BASE"})
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != records.ExceptionOpen || x.Code != normalize.CodeRecordLocked || x.Component != "BASE" || x.Current["amount"] != "100.00" {
		t.Errorf("exception given a locked record's component = %+v, want open as record_locked", x)
	}
	if a := f.amount("E1", "2026-11", "BASE"); a != "100.00" {
		t.Errorf("the locked record changed to %s", a)
	}
}

// TestPreviewHeldCode: the preview shows a row of an unmapped code as
// held unknown_component, as processing holds it.
func TestPreviewHeldCode(t *testing.T) {
	f, _ := resubmissionFixture(t, records.Partner{UnknownEmployee: records.UnknownReject}, false)
	setHoldProfile(f)
	p, err := f.store.Partner(f.ctx, f.partner)
	if err != nil {
		t.Fatal(err)
	}
	file := heldHead + "E1,2026-11,REG,100.00,USD\nE2,2026-11,XMAS,50.00,USD\nE77,2026-11,XMAS,1.00,USD\n"
	pv, err := f.in.PreviewFile(f.ctx, p, "pay-1.csv", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	_, out := f.ingest("pay-1.csv", file)
	rows := f.resultRows(out)
	want := []string{"created/", "held/unknown_component", "rejected/unknown_employee"}
	for i, r := range pv.Rows {
		if got := r.Outcome + "/" + r.Code; got != want[i] || got != rows[i]["outcome"]+"/"+rows[i]["code"] {
			t.Errorf("row %d: preview %s, processing %s/%s, want %s", i+1, got, rows[i]["outcome"], rows[i]["code"], want[i])
		}
	}
	if m := pv.Rows[1].Message; m != rows[1]["message"] || pv.Rows[1].Values["component"] != "XMAS" {
		t.Errorf("preview of the held row: %q showing %q, processing %q", m, pv.Rows[1].Values["component"], rows[1]["message"])
	}
}

// TestApproveHeldCodeRefusals: what approving a held code with a
// component cannot do is refused with what to do, and decides nothing: a
// code reviewers already said means another component, an employee the
// partner now rejects, a record a newer file wrote, and another open
// exception of the new key.
func TestApproveHeldCodeRefusals(t *testing.T) {
	f, _ := resubmissionFixture(t, records.Partner{FilePattern: `^pay-(?P<seq>[0-9]+)\.csv$`}, false)
	setHoldProfile(f)
	f.ingest("pay-5.csv", heldHead+"E1,2026-11,REG,100.00,USD\n"+
		"E1,2026-11,XMAS,5.00,USD\nE2,2026-11,XMAS,6.00,USD\nE3,2026-11,GIFT,7.00,USD\nE4,2026-11,GIFT,8.00,USD\nE7,2026-11,TIP,1.00,USD\n")
	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: f.partner, Code: normalize.CodeUnknownComponent})
	if err != nil || len(xs) != 5 {
		t.Fatalf("exceptions %v %v", xs, err)
	}
	a, b, c, d, tip := xs[0].ID, xs[1].ID, xs[2].ID, xs[3].ID, xs[4].ID
	refused := func(id int64, as, want string) {
		t.Helper()
		_, err := f.store.Decide(f.ctx, records.Decision{ExceptionID: id, Approve: true, Reviewer: "rita", AsComponent: as})
		if !errors.Is(err, records.ErrComponent) || !strings.Contains(err.Error(), want) {
			t.Errorf("approve %d as %s = %v, want a refusal saying %q", id, as, err, want)
		}
		if x, err := f.store.Exception(f.ctx, id); err != nil || x.Status != records.ExceptionOpen || x.Code != normalize.CodeUnknownComponent {
			t.Errorf("exception %d after the refusal: %+v %v", id, x, err)
		}
	}
	if _, err := f.store.Decide(f.ctx, records.Decision{ExceptionID: c, Approve: true, Reviewer: "rita", AsComponent: "BONUS"}); err != nil {
		t.Fatal(err)
	}
	refused(d, "OVERTIME", "already decided that code GIFT of partner acme means component BONUS")

	reject := records.UnknownReject
	if err := f.store.UpdatePartner(f.ctx, f.partner, records.PartnerUpdate{UnknownEmployee: &reject}); err != nil {
		t.Fatal(err)
	}
	refused(tip, "BASE", "employee E7 is not onboarded and partner acme rejects unknown employees")

	f.ingest("pay-7.csv", heldHead+"E2,2026-11,OT,50.00,USD\n")
	refused(b, "OVERTIME", "was written by a newer file (sequence 7; this row's file has 5)")

	// GIFT is read as BONUS now.
	f.ingest("pay-8.csv", heldHead+"E1,2026-11,GIFT,10.00,USD\n")
	if _, err := f.store.LockPeriod(f.ctx, f.partner, "2026-11", records.LockApproved, "ops"); err != nil {
		t.Fatal(err)
	}
	_, out := f.ingest("pay-9.csv", heldHead+"E1,2026-11,GIFT,11.00,USD\n")
	if r := heldRow(t, f.resultRows(out), "E1"); r["outcome"] != "held" || r["code"] != "record_locked" || r["component"] != "BONUS (GIFT)" {
		t.Fatalf("pay-9: %v", r)
	}
	refused(a, "BONUS", "is open for employee E1, period 2026-11, component BONUS: decide it first")
	if n := f.count(`SELECT count(*) FROM component_codes`); n != 1 {
		t.Errorf("%d component codes kept, want GIFT's only", n)
	}
}

// resubmissionFixture is a database with partner acme (p) and employees
// E1..E6 mapped, whose engine stages every file whole when stageWhole says
// so; its counter counts from then on.
func resubmissionFixture(t *testing.T, p records.Partner, stageWhole bool) (*fixture, *applytest.ResubmissionCounter) {
	t.Helper()
	c := &applytest.ResubmissionCounter{}
	return tracedFixture(t, p, c, stageWhole, "E1", "E2", "E3", "E4", "E5", "E6"), c
}

// tracedFixture is a database whose store tells tracer its statements,
// with partner acme (p) and the employees refs mapped (ref to W-ref); its
// engine stages every file whole when stageWhole says so
// (apply.Options.StageWholeFiles).
func tracedFixture(t *testing.T, p records.Partner, tracer pgx.QueryTracer, stageWhole bool, refs ...string) *fixture {
	t.Helper()
	h := applytest.NewWith(t, applytest.Config{Partner: p, Employees: refs, Tracer: tracer, StageWholeFiles: stageWhole})
	in := intake.New(h.Store, nil)
	in.Engine = h.Engine
	return &fixture{t: t, ctx: context.Background(), store: h.Store, in: in, partner: h.Partner, dir: t.TempDir()}
}
