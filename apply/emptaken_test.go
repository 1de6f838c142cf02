package apply_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// Whether the id a file's new employee would derive is taken is asked of
// employees' employee_id index, one probe per new employee: a file's
// lookup must not read every other partner's mappings, whose number has
// nothing to do with the file. With an EXISTS in the CASE, PostgreSQL
// hashed all of them (a sequential scan of employees) for a file of 2,000
// new employees once 60,000 mappings of another partner were stored.
func TestTakenEmployeeIDsProbedNotScanned(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	for _, p := range []string{"big", "small"} {
		if err := st.AddPartner(ctx, records.Partner{ID: p}); err != nil {
			t.Fatal(err)
		}
	}
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		SELECT 'big', 'B' || i, 'W-' || i, 'import' FROM generate_series(1, 60000) i`); err != nil {
		t.Fatal(err)
	}
	// One new employee of small's file would derive an id that is taken.
	if _, err := pool.Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		VALUES ('big', 'OTHER', derived_employee_id('small', 'S7'), 'derived')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE employees`); err != nil {
		t.Fatal(err)
	}
	tx := beginWithTempTables(ctx, t, pool) // the temp tables and emp's rows are the test's only
	if _, err := tx.Exec(ctx, `INSERT INTO emp_refs SELECT 'S' || i FROM generate_series(1, 2000) i; ANALYZE emp_refs`); err != nil {
		t.Fatal(err)
	}
	args := pgx.NamedArgs{"partner": "small"}
	rows, err := tx.Query(ctx, "EXPLAIN "+apply.EmpRefsSQL, args)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "\n"); strings.Contains(p, "Seq Scan on employees") {
		t.Errorf("the lookup of 2,000 new employees scans every mapping:\n%s", p)
	}
	if _, err := tx.Exec(ctx, apply.EmpRefsSQL, args); err != nil {
		t.Fatal(err)
	}
	var n, taken int
	if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE kind = 'employee_taken' AND employee_ref = 'S7') FROM emp`).Scan(&n, &taken); err != nil {
		t.Fatal(err)
	}
	if n != 2000 || taken != 1 {
		t.Errorf("emp has %d new employees, %d of them S7 taken; want 2,000 and S7 taken", n, taken)
	}
}
