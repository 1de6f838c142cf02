package records_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// employees' reference to partners is checked per statement (the schema's
// employees_check_partner and referenced_guard) exactly as a
// foreign key would be.
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

// Every record's employee has a mapping (the schema's records_check_insert, checked per
// statement): a statement of many records, one of whose employees has
// none, is refused whole, whatever plan the check takes — also on a
// connection whose first records were a single one (the check is planned
// for each statement's size).
func TestRecordsOfManyEmployeesNeedMappings(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	if err := st.AddPartner(ctx, records.Partner{ID: "acme", Name: "acme", Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	conn, err := st.Pool().Acquire(ctx) // one connection: the check's plans are its own
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		SELECT 'acme', 'E' || i, 'W-' || i, 'import' FROM generate_series(1, 20000) i WHERE i <> 12345`); err != nil {
		t.Fatal(err)
	}
	insert := func(period string, n int) error {
		_, err := conn.Exec(ctx, `INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, content_hash)
			SELECT 'acme', 'E' || i, $1, c, 1, 'USD', '\x00' FROM generate_series(1, $2) i, unnest(ARRAY['BASE', 'BONUS']) c`, period, n)
		return err
	}
	// A statement of one employee first, as a webhook's change.
	if err := insert("2026-10", 1); err != nil {
		t.Fatalf("records of one mapped employee refused: %v", err)
	}
	var pe *pgconn.PgError
	if err := insert("2026-11", 20000); !errors.As(err, &pe) || pe.Code != pgerrcode.ForeignKeyViolation || pe.Message != "record of acme/E12345 has no employee mapping" {
		t.Errorf("records of 20,000 employees, E12345 unmapped: %v, want foreign_key_violation naming acme/E12345", err)
	}
	if n := pgtest.Count(ctx, t, st, `SELECT count(*) FROM records WHERE pay_period = '2026-11'`); n != 0 {
		t.Errorf("%d records stored by the refused statement, want 0", n)
	}
	if err := insert("2026-11", 12344); err != nil {
		t.Errorf("records of mapped employees refused: %v", err)
	}
	// And after those, the unmapped employee's one record alone.
	_, err = conn.Exec(ctx, `INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, content_hash)
		VALUES ('acme', 'E12345', '2026-12', 'BASE', 1, 'USD', '\x00')`)
	if !errors.As(err, &pe) || pe.Code != pgerrcode.ForeignKeyViolation || pe.Message != "record of acme/E12345 has no employee mapping" {
		t.Errorf("the record of E12345 alone: %v, want foreign_key_violation naming acme/E12345", err)
	}
}

// The employee check of a statement of few employees, against many
// mappings, probes the mappings' primary key once per distinct employee
// instead of hashing every partner's mappings, however many records each employee has; a statement of about as
// many employees as there are mappings (a first file of new employees)
// still hashes them, its partner's alone. The plans are the
// trigger's own, read from auto_explain's nested statements.
func TestEmployeeCheckProbesForFewRecords(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	st, err := records.Open(ctx, url, records.Options{SecretKeys: pgtest.TestSecretKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, p := range []string{"big", "acme"} {
		if err := st.AddPartner(ctx, records.Partner{ID: p, Name: p, Currency: "USD"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Pool().Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		SELECT 'big', 'B' || i, 'W-' || i, 'import' FROM generate_series(1, 60000) i;
		INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		SELECT 'acme', 'E' || i, 'A-' || i, 'import' FROM generate_series(1, 2000) i;
		ANALYZE employees`); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;
		SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice`); err != nil {
		t.Fatal(err)
	}
	// checkPlan inserts records of n employees (components each, in
	// period) and returns the plan of the trigger's check.
	checkPlan := func(period string, n, components int) string {
		t.Helper()
		notices = nil
		if _, err := conn.Exec(ctx, `INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, content_hash)
			SELECT 'acme', 'E' || i, $1, 'C' || c, 1, 'USD', '\x00' FROM generate_series(1, $2) i, generate_series(1, $3) c`, period, n, components); err != nil {
			t.Fatalf("records of %d mapped employees: %v", n, err)
		}
		for _, m := range notices {
			if strings.Contains(m, "unnest") && strings.Contains(m, "employees e") {
				return m
			}
		}
		t.Fatalf("no plan of the employee check among %d notices", len(notices))
		return ""
	}
	// 4,000 records of 2,000 employees against 62,000 mappings: probed.
	if p := checkPlan("2026-10", 2000, 2); strings.Contains(p, "Seq Scan on employees") || !strings.Contains(p, "Index Only Scan using employees_pkey") {
		t.Errorf("the check of 4,000 records reads every mapping; want one probe per employee:\n%s", p)
	}
	// 30,000 records of the same 2,000 employees, more records than a
	// quarter of the mappings: still one probe per employee.
	if p := checkPlan("2026-09", 2000, 15); strings.Contains(p, "Seq Scan on employees") || !strings.Contains(p, "Index Only Scan using employees_pkey") {
		t.Errorf("the check of 30,000 records of 2,000 employees reads every mapping; want one probe per employee:\n%s", p)
	}
	// 124,000 records of as many mappings' employees: hashed.
	if _, err := conn.Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		SELECT 'acme', 'E' || i, 'A-' || i, 'import' FROM generate_series(2001, 62000) i`); err != nil {
		t.Fatal(err)
	}
	// Only acme's mappings are read , not big's too.
	if p := checkPlan("2026-11", 62000, 2); !strings.Contains(p, "Hash Anti Join") || !strings.Contains(p, "partner_id = ANY ('{acme}'") {
		t.Errorf("the check of 124,000 records, as many as there are mappings, does not hash acme's mappings alone:\n%s", p)
	}
}

// The records' insert trigger only guards: a record whose employee has no
// mapping is refused, for a few employees (probed) and for many (hashed),
// and no mapping is created, whatever the session sets — a custom setting
// such as payintake.onboard for a partner that creates mappings included.
// Onboarding is the engine's own statement, before the records.
func TestInsertTriggerNeverOnboards(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	for _, p := range []records.Partner{{ID: "acme"}, {ID: "other"}} {
		p.Name, p.Currency = p.ID, "USD"
		if err := st.AddPartner(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Pool().Exec(ctx, `INSERT INTO employees (partner_id, employee_ref, employee_id, source)
		VALUES ('acme', 'E3', 'W-3', 'import')`); err != nil {
		t.Fatal(err)
	}
	// insert inserts one record of each (partner, ref) in a transaction
	// that sets payintake.onboard to acme, and returns the error.
	insert := func(partners, refs []string) error {
		t.Helper()
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT set_config('payintake.onboard', 'acme', true)`); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, content_hash)
			SELECT p, r, '2026-11', 'BASE', 1, 'USD', '\x00' FROM unnest($1::text[], $2::text[]) u(p, r)`, partners, refs)
		if err == nil {
			err = tx.Commit(ctx)
		}
		return err
	}
	refused := func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == pgerrcode.ForeignKeyViolation && strings.Contains(pe.Message, "has no employee mapping")
	}
	acme := func(n int) []string { return slices.Repeat([]string{"acme"}, n) }
	// Many references for the mappings there are: the hashed form.
	many := make([]string, 5000)
	for i := range many {
		many[i] = fmt.Sprintf("M%d", i)
	}
	for name, tc := range map[string]struct{ partners, refs []string }{
		"one of three unmapped":          {acme(3), []string{"E1", "E3", "E2"}},
		"5,000 unmapped":                 {acme(len(many)), many},
		"a second partner's, unmapped":   {[]string{"acme", "other"}, []string{"E3", "O1"}},
		"unmapped, of the other partner": {[]string{"other"}, []string{"O2"}},
	} {
		if err := insert(tc.partners, tc.refs); !refused(err) {
			t.Errorf("%s: %v; want the record without a mapping refused", name, err)
		}
	}
	var mappings int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM employees`).Scan(&mappings); err != nil || mappings != 1 {
		t.Errorf("%d mappings (%v); want only the one imported", mappings, err)
	}
	// A mapped employee's record goes in.
	if err := insert(acme(1), []string{"E3"}); err != nil {
		t.Errorf("the record of a mapped employee: %v", err)
	}
}
