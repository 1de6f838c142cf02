package review

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/payintake/payintake/records"
)

func (f *fixture) summary(b records.BulkDecision) records.Summary {
	f.t.Helper()
	if b.Filter.Partner == "" {
		b.Filter.Partner = "acme"
	}
	s, err := f.store.Summarize(f.ctx, b)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func TestBulkFilters(t *testing.T) {
	f := newFixture(t)
	// E1 1000.00 → 1100.00, E3 50.00 → 75.00, E4 new at 500.00 (period closed).
	for _, c := range []struct {
		name  string
		f     records.ExceptionFilter
		count int
		total string
	}{
		{"partner", records.ExceptionFilter{}, 3, "3 open exception(s), total amount change +625.00 USD"},
		{"period", records.ExceptionFilter{Period: "2024-01"}, 3, ""},
		{"other period", records.ExceptionFilter{Period: "2024-02"}, 0, "0 open exception(s), total amount change none"},
		{"file, any case", records.ExceptionFilter{File: "JAN-FIX.csv"}, 3, ""},
		{"file without exceptions", records.ExceptionFilter{File: "jan.csv"}, 0, ""},
		{"code", records.ExceptionFilter{Code: "period_locked"}, 1, "1 open exception(s), total amount change +500.00 USD"},
		{"component", records.ExceptionFilter{Component: "bonus"}, 1, "1 open exception(s), total amount change +25.00 USD"},
		{"employee prefix", records.ExceptionFilter{Employee: "e"}, 3, ""},
		{"employee", records.ExceptionFilter{Employee: "E1"}, 1, "1 open exception(s), total amount change +100.00 USD"},
		{"min change", records.ExceptionFilter{MinChange: "100"}, 2, "2 open exception(s), total amount change +600.00 USD"},
		{"max change", records.ExceptionFilter{MaxChange: "99.99"}, 1, "1 open exception(s), total amount change +25.00 USD"},
		{"both", records.ExceptionFilter{MinChange: "26", MaxChange: "499"}, 1, "1 open exception(s), total amount change +100.00 USD"},
	} {
		s := f.summary(records.BulkDecision{Filter: c.f})
		if s.Count != c.count || (c.total != "" && s.String() != c.total) {
			t.Errorf("%s: %s, want %d (%s)", c.name, s, c.count, c.total)
		}
		c.f.Partner, c.f.Status = "acme", "open"
		xs, err := f.store.Exceptions(f.ctx, c.f)
		if err != nil || len(xs) != c.count {
			t.Errorf("%s: the queue lists %d exceptions (%v), the summary counts %d", c.name, len(xs), err, c.count)
		}
	}
	for _, bad := range []records.ExceptionFilter{{MinChange: "1e3"}, {MaxChange: "ten"}, {Code: "locked"}} {
		bad.Partner = "acme"
		if _, err := f.store.Summarize(f.ctx, records.BulkDecision{Filter: bad}); err == nil {
			t.Errorf("filter %+v accepted", bad)
		}
	}
	if _, err := f.store.Summarize(f.ctx, records.BulkDecision{Filter: records.ExceptionFilter{}}); err == nil {
		t.Error("a bulk decision without a partner was accepted")
	}
	if _, err := f.store.DecideAll(f.ctx, records.BulkDecision{Filter: records.ExceptionFilter{Partner: "acme"},
		Reviewer: "bob", Partners: []string{"globex"}}); err == nil || !strings.Contains(err.Error(), "may not decide") {
		t.Errorf("a reviewer of globex decided acme's exceptions: %v", err)
	}
}

// A decided exception is decided as Decide would: stale approvals are
// refused and reported, the rest decided with an audit row each, and the
// review report written once the submission's last exception closes.
func TestBulkApproveKeepsTheSingleRules(t *testing.T) {
	f := newFixture(t)
	if _, err := f.store.UnlockPeriod(f.ctx, "acme", "2024-01", "lead", "correction ticket 42"); err != nil {
		t.Fatal(err)
	}
	f.ingest("acme", "jan-correction.csv", header+"E1,2024-01,BASE,1300.00,USD\n")
	if _, err := f.store.LockPeriod(f.ctx, "acme", "2024-01", records.LockApproved, "lead"); err != nil {
		t.Fatal(err)
	}
	res, err := f.store.DecideAll(f.ctx, records.BulkDecision{Filter: records.ExceptionFilter{Partner: "acme"},
		Approve: true, Reviewer: "alice", Note: "late corrections", Via: records.ViaAPI, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decided != 2 || res.Batches != 2 || len(res.Refused) != 1 || res.Refused[0].ExceptionID != f.e1.ID ||
		res.Refused[0].Reason != "stale" || !strings.Contains(res.Refused[0].Detail, "changed after the change was held") {
		t.Fatalf("bulk approve = %+v", res)
	}
	if r := f.record("E1", "BASE"); r.Amount != "1300.00" {
		t.Fatalf("a stale exception was applied: %+v", r)
	}
	if r := f.record("E3", "BONUS"); r.Amount != "75.00" || r.Version != 2 {
		t.Fatalf("E3 after bulk approve = %+v", r)
	}
	if r := f.record("E4", "BASE"); r.Amount != "500.00" || r.LockedReason != "approved" {
		t.Fatalf("E4 after bulk approve = %+v", r)
	}
	if n := f.count(`SELECT count(*) FROM review_audit WHERE action = 'approve' AND actor = 'alice' AND via = 'api' AND detail = 'late corrections'`); n != 2 {
		t.Fatalf("%d audit rows, want 2", n)
	}
	if n := f.count(`SELECT count(*) FROM envelope_reviews WHERE envelope_id = $1`, f.env2.ID); n != 0 {
		t.Fatal("the review report was written while an exception is still open")
	}
	// Rejecting what is left closes the submission: its report is written.
	res, err = f.store.DecideAll(f.ctx, records.BulkDecision{Filter: records.ExceptionFilter{Partner: "acme", File: "jan-fix.csv"},
		Reviewer: "alice", Note: "superseded by the correction"})
	if err != nil || res.Decided != 1 || len(res.Refused) != 0 || res.Status != "rejected" {
		t.Fatalf("bulk reject = %+v, %v", res, err)
	}
	rep, err := reviewReport(t, f, f.env2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(rep, ",approved,") != 2 || strings.Count(rep, "rejected_by_reviewer") != 1 {
		t.Fatalf("review report:\n%s", rep)
	}
	// Nothing open matches any more: a second run decides nothing.
	if res, err := f.store.DecideAll(f.ctx, records.BulkDecision{Filter: records.ExceptionFilter{Partner: "acme"},
		Approve: true, Reviewer: "alice"}); err != nil || res.Decided != 0 || res.Batches != 0 {
		t.Fatalf("second run = %+v, %v", res, err)
	}
}

// TestBulkDecidesTenThousand decides 10,000 exceptions in one action, in
// bounded batches, while another partner's lock is held by someone else the
// whole time: a bulk decision never waits for other partners.
func TestBulkDecidesTenThousand(t *testing.T) {
	f := newFixture(t)
	const n = 10000
	var first, second strings.Builder
	first.WriteString(header)
	second.WriteString(header)
	for i := range n {
		fmt.Fprintf(&first, "W%05d,2024-03,BASE,%d.00,USD\n", i, 1000+i)
		fmt.Fprintf(&second, "W%05d,2024-03,BASE,%d.50,USD\n", i, 1000+i)
	}
	f.ingest("globex", "march.csv", first.String())
	if _, err := f.store.LockPeriod(f.ctx, "globex", "2024-03", records.LockApproved, "lead"); err != nil {
		t.Fatal(err)
	}
	env := f.ingest("globex", "march-late.csv", second.String())
	if env.Counts["held"] != n {
		t.Fatalf("late file counts %v", env.Counts)
	}
	b := records.BulkDecision{Filter: records.ExceptionFilter{Partner: "globex", File: "march-late.csv"},
		Approve: true, Reviewer: "alice", Note: "late corrections approved by payroll"}
	if s := f.summary(b); s.String() != "10000 open exception(s), total amount change +5000.00 USD" {
		t.Fatalf("summary: %s", s)
	}
	// acme's partner lock is held by another transaction throughout.
	hold, err := f.store.Pool().Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.Background()) }()
	if _, err := hold.Exec(f.ctx, `SELECT pg_advisory_xact_lock(7310, hashtext('acme'))`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := f.store.DecideAll(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10,000 exceptions approved in %v (%d batches)", time.Since(start).Round(time.Millisecond), res.Batches)
	if res.Decided != n || len(res.Refused) != 0 || res.Batches != n/records.BulkBatchSize {
		t.Fatalf("result: decided %d, refused %d, batches %d", res.Decided, len(res.Refused), res.Batches)
	}
	if c := f.count(`SELECT count(*) FROM records WHERE partner_id = 'globex' AND version = 2 AND amount - trunc(amount) = 0.5`); c != n {
		t.Fatalf("%d records at their approved version, want %d", c, n)
	}
	if c := f.count(`SELECT count(*) FROM review_audit WHERE action = 'approve' AND partner_id = 'globex'`); c != n {
		t.Fatalf("%d audit rows, want %d", c, n)
	}
	if _, err := reviewReport(t, f, env.ID); err != nil {
		t.Fatalf("review report of the late file: %v", err)
	}
	if err := hold.Rollback(f.ctx); err != nil && err != pgx.ErrTxClosed {
		t.Fatal(err)
	}
}
