package review

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fixture is a database with partner acme whose period 2024-01 is locked and
// a second file that proposes changes to it, so it has three open exceptions.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	store *records.Store
	in    *intake.Intake
	dir   string
	env1  records.Envelope // jan.csv, applied before the lock
	env2  records.Envelope // jan-fix.csv, held
	e1    records.Exception
	e3    records.Exception
	e4    records.Exception // period_locked: a new natural key
}

const header = "employee_ref,pay_period,component,amount,currency\n"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), store: pgtest.Store(t), dir: t.TempDir()}
	f.in = intake.New(f.store, nil)
	for _, p := range []string{"acme", "globex"} {
		if err := f.store.AddPartner(f.ctx, records.Partner{ID: p, Name: p}); err != nil {
			t.Fatal(err)
		}
	}
	f.env1 = f.ingest("acme", "jan.csv", header+
		"E1,2024-01,BASE,1000.00,USD\n"+
		"E2,2024-01,BASE,2000.00,USD\n"+
		"E3,2024-01,BONUS,50,USD\n")
	if f.env1.Counts["created"] != 3 {
		t.Fatalf("jan.csv counts = %v, want 3 created", f.env1.Counts)
	}
	if _, err := f.store.LockPeriod(f.ctx, "acme", "2024-01", records.LockApproved, "lead"); err != nil {
		t.Fatal(err)
	}
	f.env2 = f.ingest("acme", "jan-fix.csv", header+
		"E1,2024-01,BASE,1100.00,USD\n"+
		"E2,2024-01,BASE,2000.00,USD\n"+
		"E3,2024-01,BONUS,75.00,USD\n"+
		"E4,2024-01,BASE,500.00,USD\n")
	if f.env2.Counts["held"] != 3 || f.env2.Counts["unchanged"] != 1 {
		t.Fatalf("jan-fix.csv counts = %v, want held=3 unchanged=1", f.env2.Counts)
	}
	xs, err := f.store.Exceptions(f.ctx, records.ExceptionFilter{Partner: "acme", Status: "open"})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 3 {
		t.Fatalf("%d open exceptions, want 3", len(xs))
	}
	f.e1, f.e3, f.e4 = xs[0], xs[1], xs[2]
	if f.e1.EmployeeRef != "E1" || f.e3.EmployeeRef != "E3" || f.e4.EmployeeRef != "E4" || f.e4.Code != "period_locked" {
		t.Fatalf("unexpected exceptions %+v", xs)
	}
	return f
}

// ingest processes a file now, as `payintake ingest` does.
func (f *fixture) ingest(partner, name, content string) records.Envelope {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	_, out, err := f.in.IngestFile(f.ctx, partner, path, "test")
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) decide(id int64, approve bool, who, note string) (records.Exception, error) {
	return f.store.Decide(f.ctx, records.Decision{ExceptionID: id, Approve: approve, Reviewer: who, Note: note})
}

func (f *fixture) record(emp, comp string) records.Record {
	f.t.Helper()
	r, err := f.store.FindRecord(f.ctx, "acme", emp, "2024-01", comp)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) exception(id int64) records.ExceptionDetail {
	f.t.Helper()
	d, err := f.store.ExceptionDetail(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	return pgtest.Count(f.ctx, f.t, f.store, sql, args...)
}
