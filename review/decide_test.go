package review

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/payintake/payintake/records"
)

func TestExceptionHoldsBothSides(t *testing.T) {
	f := newFixture(t)
	d := f.exception(f.e1.ID)
	if d.Code != "record_locked" || d.Status != "open" || d.File != "jan-fix.csv" || d.Line != 2 || d.RowNo != 1 {
		t.Fatalf("exception = %+v", d)
	}
	if d.Current["amount"] != "1000.00" || d.Proposed["amount"] != "1100.00" {
		t.Fatalf("current %v proposed %v", d.Current, d.Proposed)
	}
	if strings.Join(d.Differing, ",") != "amount" {
		t.Fatalf("differing = %v, want [amount]", d.Differing)
	}
	if d.Stale != "" || d.Record == nil || d.Record.LockedReason != "approved" || len(d.History) != 1 {
		t.Fatalf("detail = %+v", d)
	}
	d4 := f.exception(f.e4.ID)
	if d4.Current != nil || d4.Record != nil || d4.RecordID != 0 || len(d4.History) != 0 {
		t.Fatalf("new-key exception = %+v", d4)
	}
}

func TestApproveAppliesANewLockedVersion(t *testing.T) {
	f := newFixture(t)
	before := f.record("E1", "BASE")
	x, err := f.decide(f.e1.ID, true, "alice", "confirmed with payroll")
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != "approved" || x.DecidedBy != "alice" || x.Note != "confirmed with payroll" || x.DecidedAt == nil {
		t.Fatalf("decided exception = %+v", x)
	}
	r := f.record("E1", "BASE")
	if r.Amount != "1100.00" || r.Version != before.Version+1 || r.LockedReason != "approved" {
		t.Fatalf("record after approve = %+v", r)
	}
	var hashOK bool
	if err := f.store.Pool().QueryRow(f.ctx, `SELECT r.content_hash = x.proposed_hash FROM records r, exceptions x
		WHERE r.id = $1 AND x.id = $2`, r.ID, f.e1.ID).Scan(&hashOK); err != nil || !hashOK {
		t.Fatalf("content hash is not the proposed hash (%v)", err)
	}
	var amount, by string
	if err := f.store.Pool().QueryRow(f.ctx, `SELECT amount::text, replaced_by FROM record_history WHERE record_id = $1 AND version = 1`,
		r.ID).Scan(&amount, &by); err != nil {
		t.Fatal(err)
	}
	if amount != "1000.00" || by != fmt.Sprintf("exception %d approved by alice", f.e1.ID) {
		t.Fatalf("history = %s %q", amount, by)
	}
	d := f.exception(f.e1.ID)
	if len(d.History) != 2 || d.History[0].Version != 2 || d.History[0].File != "jan-fix.csv" || d.History[1].Amount != "1000.00" {
		t.Fatalf("history = %+v", d.History)
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE exception_id = $1 AND action = 'approve' AND actor = 'alice'`, f.e1.ID); n != 1 {
		t.Fatalf("%d audit rows for the approval, want 1", n)
	}
	// The approved values are now the record's: the same change again is unchanged, not held.
	env := f.ingest("acme", "jan-again.csv", header+"E1,2024-01,BASE,1100.00,USD\n")
	if env.Counts["unchanged"] != 1 {
		t.Fatalf("resending the approved change: counts %v, want unchanged=1", env.Counts)
	}
}

func TestApproveNewKeyCreatesALockedRecord(t *testing.T) {
	f := newFixture(t)
	if _, err := f.decide(f.e4.ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
	r := f.record("E4", "BASE")
	if r.Amount != "500.00" || r.Version != 1 || r.LockedReason != "approved" {
		t.Fatalf("new record = %+v", r)
	}
	if d := f.exception(f.e4.ID); d.RecordID != r.ID || d.Note != "" {
		t.Fatalf("exception not linked to its record: %+v", d)
	}
}

func TestRejectLeavesTheRecord(t *testing.T) {
	f := newFixture(t)
	before := f.record("E3", "BONUS")
	x, err := f.decide(f.e3.ID, false, "bob", "not agreed")
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != "rejected" || x.DecidedBy != "bob" || x.Note != "not agreed" {
		t.Fatalf("rejected exception = %+v", x)
	}
	after := f.record("E3", "BONUS")
	if after.Amount != before.Amount || after.Version != before.Version || after.UpdatedAt != before.UpdatedAt {
		t.Fatalf("record changed by reject: %+v -> %+v", before, after)
	}
	if _, err := f.decide(f.e4.ID, false, "bob", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.FindRecord(f.ctx, "acme", "E4", "2024-01", "BASE"); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("rejecting a new key created a record: %v", err)
	}
	if n := f.count(`SELECT count(*) FROM record_history`); n != 0 {
		t.Fatalf("%d history rows after rejects, want 0", n)
	}
}

func TestDecidedIsFinal(t *testing.T) {
	f := newFixture(t)
	if _, err := f.decide(f.e1.ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.decide(f.e3.ID, false, "alice", ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id      int64
		approve bool
		want    string
	}{
		{f.e1.ID, true, "was already approved by alice at"},
		{f.e1.ID, false, "was already approved by alice at"},
		{f.e3.ID, true, "was already rejected by alice at"},
		{f.e3.ID, false, "was already rejected by alice at"},
	} {
		_, err := f.decide(c.id, c.approve, "bob", "late")
		var de *records.DecidedError
		if !errors.As(err, &de) || !errors.Is(err, records.ErrDecided) || !strings.Contains(err.Error(), c.want) ||
			!strings.HasPrefix(err.Error(), fmt.Sprintf("exception %d ", c.id)) {
			t.Fatalf("deciding %d again: %v, want %q", c.id, err, c.want)
		}
	}
	if r := f.record("E1", "BASE"); r.Version != 2 {
		t.Fatalf("record version %d after a refused second decision, want 2", r.Version)
	}
	if d := f.exception(f.e1.ID); d.DecidedBy != "alice" || d.Note != "" {
		t.Fatalf("refused decision changed the exception: %+v", d)
	}
	if _, err := f.decide(999999, true, "bob", ""); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("unknown exception: %v", err)
	}
}

func TestSupersession(t *testing.T) {
	f := newFixture(t)
	// An identical re-proposal (other file, same values) does not open a second exception.
	f.ingest("acme", "jan-fix-resent.csv", header+"E1,2024-01,BASE,1100.00,USD\n")
	if n := f.count(`SELECT count(*) FROM exceptions WHERE employee_ref = 'E1'`); n != 1 {
		t.Fatalf("%d exceptions for E1 after an identical re-proposal, want 1", n)
	}
	if d := f.exception(f.e1.ID); d.Status != "open" {
		t.Fatalf("identical re-proposal changed the exception: %+v", d)
	}
	// A different proposal supersedes the open one (one open exception per record).
	f.ingest("acme", "jan-fix2.csv", header+"E1,2024-01,BASE,1200.00,USD\n")
	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var newer records.Exception
	for _, x := range xs {
		if x.EmployeeRef == "E1" && x.ID != f.e1.ID {
			newer = x
		}
	}
	if newer.ID == 0 || newer.Status != "open" || newer.Proposed["amount"] != "1200.00" || newer.Current["amount"] != "1000.00" {
		t.Fatalf("superseding exception = %+v", newer)
	}
	old := f.exception(f.e1.ID)
	if old.Status != "superseded" || old.SupersededBy != newer.ID || old.DecidedAt == nil {
		t.Fatalf("superseded exception = %+v", old)
	}
	// open -> superseded is final: neither approve nor reject.
	for _, approve := range []bool{true, false} {
		_, err := f.decide(f.e1.ID, approve, "alice", "")
		var de *records.DecidedError
		if !errors.As(err, &de) || de.SupersededBy != newer.ID ||
			!strings.Contains(err.Error(), "superseded at") || !strings.Contains(err.Error(), fmt.Sprintf("decide exception %d instead", newer.ID)) {
			t.Fatalf("deciding a superseded exception: %v", err)
		}
	}
	// The newer one is decided normally.
	if _, err := f.decide(newer.ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if r := f.record("E1", "BASE"); r.Amount != "1200.00" || r.Version != 2 {
		t.Fatalf("record = %+v", r)
	}
	if n := f.count(`SELECT count(*) FROM exceptions WHERE status = 'open' AND employee_ref = 'E1'`); n != 0 {
		t.Fatalf("%d open exceptions for E1", n)
	}
}

func TestConcurrentDecisionsOneWins(t *testing.T) {
	f := newFixture(t)
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = f.decide(f.e1.ID, i%2 == 0, fmt.Sprintf("reviewer%d", i), "race")
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("reviewers %d and %d both won", winner, i)
			}
			winner = i
			continue
		}
		if !errors.Is(err, records.ErrDecided) {
			t.Fatalf("reviewer %d: %v, want an already-decided error", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("nobody won")
	}
	d := f.exception(f.e1.ID)
	wantStatus := map[bool]string{true: "approved", false: "rejected"}[winner%2 == 0]
	if d.DecidedBy != fmt.Sprintf("reviewer%d", winner) || d.Status != wantStatus {
		t.Fatalf("exception decided by %s (%s), winner was reviewer%d", d.DecidedBy, d.Status, winner)
	}
	for i, err := range errs {
		if i != winner && !strings.Contains(err.Error(), fmt.Sprintf("was already %s by reviewer%d at", wantStatus, winner)) {
			t.Fatalf("loser %d was told %q", i, err)
		}
	}
	wantVersion, wantHistory := 1, 0
	if winner%2 == 0 {
		wantVersion, wantHistory = 2, 1
	}
	if r := f.record("E1", "BASE"); r.Version != wantVersion {
		t.Fatalf("record version %d, want %d", r.Version, wantVersion)
	}
	if h := f.count(`SELECT count(*) FROM record_history`); h != wantHistory {
		t.Fatalf("%d history rows, want %d", h, wantHistory)
	}
	if a := f.count(`SELECT count(*) FROM review_audit WHERE exception_id = $1 AND action IN ('approve', 'reject')`, f.e1.ID); a != 1 {
		t.Fatalf("%d decision audit rows, want 1", a)
	}
}

func TestStaleApprovalRefused(t *testing.T) {
	f := newFixture(t)
	// An authorised correction: the period is reopened and E1 and E4 change underneath the open exceptions.
	if _, err := f.store.UnlockPeriod(f.ctx, "acme", "2024-01", "lead", "correction ticket 42"); err != nil {
		t.Fatal(err)
	}
	env := f.ingest("acme", "jan-correction.csv", header+"E1,2024-01,BASE,1300.00,USD\nE4,2024-01,BASE,600.00,USD\n")
	if env.Counts["updated"] != 1 || env.Counts["created"] != 1 {
		t.Fatalf("correction counts %v", env.Counts)
	}
	_, err := f.decide(f.e1.ID, true, "alice", "")
	var se *records.StaleError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "changed after the change was held (it is now version 2)") {
		t.Fatalf("approving a stale exception: %v", err)
	}
	if d := f.exception(f.e1.ID); d.Status != "open" || d.Stale == "" {
		t.Fatalf("stale exception = %+v", d)
	}
	if r := f.record("E1", "BASE"); r.Amount != "1300.00" {
		t.Fatalf("refused approval changed the record: %+v", r)
	}
	_, err = f.decide(f.e4.ID, true, "alice", "")
	if !errors.As(err, &se) || !se.NewKey {
		t.Fatalf("approving a held new key that now exists: %v", err)
	}
	// Rejecting a stale exception is fine.
	if _, err := f.decide(f.e1.ID, false, "alice", "superseded by the correction"); err != nil {
		t.Fatal(err)
	}
	// An exception whose record did not move is still approvable.
	if _, err := f.decide(f.e3.ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
}

func TestUnlockPeriod(t *testing.T) {
	f := newFixture(t)
	n, err := f.store.UnlockPeriod(f.ctx, "acme", "2024-01", "lead", "correction ticket 42")
	if err != nil || n != 3 {
		t.Fatalf("unlock: %d records, %v", n, err)
	}
	if r := f.record("E1", "BASE"); r.LockedReason != "" {
		t.Fatalf("record still locked: %+v", r)
	}
	if _, err := f.store.UnlockPeriod(f.ctx, "acme", "2024-01", "lead", "again"); !errors.Is(err, records.ErrNotLocked) {
		t.Fatalf("unlocking twice: %v", err)
	}
	if _, err := f.store.UnlockPeriod(f.ctx, "acme", "2024-02", "", "x"); err == nil {
		t.Fatal("unlock without --by accepted")
	}
	env := f.ingest("acme", "feb.csv", header+"E2,2024-01,BASE,2100.00,USD\n")
	if env.Counts["updated"] != 1 {
		t.Fatalf("after unlock: %v, want updated", env.Counts)
	}
	if _, err := f.store.LockPeriod(f.ctx, "acme", "2024-01", records.LockPaid, "payroll"); err != nil {
		t.Fatal(err)
	}
	evs, err := f.store.LockEvents(f.ctx, "acme", "2024-01")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Action+" "+e.Reason+" by "+e.By)
		if e.At.IsZero() {
			t.Fatalf("lock event without time: %+v", e)
		}
	}
	want := "lock approved by lead|unlock correction ticket 42 by lead|lock paid by payroll"
	if strings.Join(got, "|") != want {
		t.Fatalf("lock events = %q, want %q", strings.Join(got, "|"), want)
	}
	// Open exceptions survive an unlock and can still be decided.
	if _, err := f.decide(f.e3.ID, true, "alice", ""); err != nil {
		t.Fatal(err)
	}
}

func reviewReport(t *testing.T, f *fixture, env int64) (string, error) {
	t.Helper()
	var b bytes.Buffer
	err := f.store.ReviewReport(f.ctx, env, &b)
	return b.String(), err
}

func TestReviewReport(t *testing.T) {
	f := newFixture(t)
	if _, err := f.decide(f.e1.ID, true, "alice", "confirmed, see \"ticket 7\""); err != nil {
		t.Fatal(err)
	}
	// E3's change is superseded by a later file before anyone decided it.
	f.ingest("acme", "jan-fix2.csv", header+"E3,2024-01,BONUS,80.00,USD\n")
	if _, err := reviewReport(t, f, f.env2.ID); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("report with an open exception left: %v", err)
	}
	if rs, err := f.store.ReviewReports(f.ctx, "acme"); err != nil || len(rs) != 0 {
		t.Fatalf("reports = %v, %v", rs, err)
	}
	if _, err := f.decide(f.e4.ID, false, "bob", "new hires go in next month's file"); err != nil {
		t.Fatal(err)
	}
	got, err := reviewReport(t, f, f.env2.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := records.ResultHeader +
		`2,1,approved,E1,2024-01,BASE,1100.00,USD,,,"a reviewer approved this change and it was applied; the record stays locked; reviewer's note: confirmed, see ""ticket 7"""` + "\n" +
		`4,3,rejected,E3,2024-01,BONUS,75.00,USD,superseded,,"this change was not applied: a later file proposed a different change for the same record, which is reviewed instead"` + "\n" +
		`5,4,rejected,E4,2024-01,BASE,500.00,USD,rejected_by_reviewer,,"a reviewer rejected this change, so the record keeps its locked values; reviewer's note: new hires go in next month's file"` + "\n"
	if got != want {
		t.Fatalf("review report:\n%s\nwant:\n%s", got, want)
	}
	rs, err := f.store.ReviewReports(f.ctx, "acme")
	if err != nil || len(rs) != 1 || rs[0].EnvelopeID != f.env2.ID || rs[0].Name != "jan-fix.review.csv" ||
		rs[0].FileName != "jan-fix.csv" || rs[0].Size != int64(len(want)) {
		t.Fatalf("reports = %+v, %v", rs, err)
	}
	// A repeat of the file shares the original's report.
	path := f.dir + "/jan-fix.csv"
	got2, _, err := f.in.IngestFile(f.ctx, "acme", path, "test")
	if err != nil || got2.Status != records.StatusRepeat {
		t.Fatalf("repeat: %+v %v", got2, err)
	}
	if r, err := reviewReport(t, f, got2.ID); err != nil || r != want {
		t.Fatalf("report of the repeat: %v", err)
	}
	// An envelope without exceptions has no report; globex sees none of acme's.
	if _, err := reviewReport(t, f, f.env1.ID); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("report of an envelope without exceptions: %v", err)
	}
	if rs, _ := f.store.ReviewReports(f.ctx, "globex"); len(rs) != 0 {
		t.Fatalf("globex sees %v", rs)
	}
}

// When supersession closes the last open exception of a file, its report is
// written in the transaction that applied the later file.
func TestReviewReportWrittenBySupersession(t *testing.T) {
	f := newFixture(t)
	one := f.ingest("acme", "jan-one.csv", header+"E2,2024-01,BASE,2222.00,USD\n")
	if one.Counts["held"] != 1 {
		t.Fatalf("counts %v", one.Counts)
	}
	f.ingest("acme", "jan-two.csv", header+"E2,2024-01,BASE,2333.00,USD\n")
	got, err := reviewReport(t, f, one.ID)
	if err != nil {
		t.Fatalf("no report after supersession: %v", err)
	}
	want := records.ResultHeader + `2,1,rejected,E2,2024-01,BASE,2222.00,USD,superseded,,"this change was not applied: a later file proposed a different change for the same record, which is reviewed instead"` + "\n"
	if got != want {
		t.Fatalf("report:\n%s\nwant:\n%s", got, want)
	}
}

func TestReviewReportEscapesFormulas(t *testing.T) {
	f := newFixture(t)
	env := f.ingest("acme", "jan-formula.csv", header+"=HYPERLINK(1),2024-01,BASE,10.00,USD\n")
	if env.Counts["held"] != 1 {
		t.Fatalf("counts %v", env.Counts)
	}
	xs, _ := f.store.Exceptions(f.ctx, records.ExceptionFilter{Status: "open", Partner: "acme"})
	last := xs[len(xs)-1]
	if _, err := f.decide(last.ID, false, "bob", "=cmd()"); err != nil {
		t.Fatal(err)
	}
	got, err := reviewReport(t, f, env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "\n2,1,rejected,'=HYPERLINK(1),") {
		t.Fatalf("formula not escaped:\n%s", got)
	}
}
