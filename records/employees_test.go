package records_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// employees' reference to partners is checked per statement (migration
// 00190) exactly as the foreign key it replaces did.
func TestEmployeeReferencesAreEnforced(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	for _, id := range []string{"acme", "empty"} {
		if err := st.AddPartner(ctx, records.Partner{ID: id, Name: id, Currency: "USD"}); err != nil {
			t.Fatal(err)
		}
	}
	isFK := func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == pgerrcode.ForeignKeyViolation
	}
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		VALUES ('acme', 'E1', 'W-1', 'import'), ('nobody', 'E2', 'W-2', 'import')`); !isFK(err) {
		t.Errorf("mapping of an unknown partner: %v, want foreign_key_violation", err)
	}
	if n := pgtest.Count(ctx, t, st, `SELECT count(*) FROM employees`); n != 0 {
		t.Errorf("%d mappings stored by the refused statement, want 0", n)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source) VALUES ('acme', 'E1', 'W-1', 'import')`); err != nil {
		t.Fatalf("valid mapping refused: %v", err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM partners WHERE id = 'acme'`); !isFK(err) {
		t.Errorf("delete a partner with mappings: %v, want foreign_key_violation", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE partners SET id = 'acme2' WHERE id = 'acme'`); !isFK(err) {
		t.Errorf("rename a partner with mappings: %v, want foreign_key_violation", err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM partners WHERE id = 'empty'`); err != nil {
		t.Errorf("delete a partner without mappings: %v", err)
	}
}
