package intake_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/records"
)

// records' references to partners and envelopes are checked per statement
// (records_check_insert and records_check_references) exactly as the foreign keys they replace did.
func TestRecordReferencesAreEnforced(t *testing.T) {
	f := newFixture(t, records.Partner{})
	_, out := f.ingest("a.csv", "employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,100.00,USD\n")
	pool := f.store.Pool()
	isFK := func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == pgerrcode.ForeignKeyViolation
	}
	_, err := pool.Exec(f.ctx, `INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, content_hash)
		VALUES ('nobody', 'E1', '2026-11', 'BASE', 1, 'USD', '\x00')`)
	if !isFK(err) {
		t.Errorf("record of an unknown partner: %v, want foreign_key_violation", err)
	}
	// A record of a known partner and mapped employee, of an unknown envelope.
	_, err = pool.Exec(f.ctx, `INSERT INTO records (partner_id, employee_ref, pay_period, component, amount, currency, content_hash, envelope_id)
		VALUES ($1, 'E1', '2026-12', 'BASE', 1, 'USD', '\x00', 999999)`, f.partner)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgerrcode.ForeignKeyViolation || pe.Message != `insert or update on table "records" violates its reference to envelopes` {
		t.Errorf("insert of a record of an unknown envelope: %v, want foreign_key_violation naming envelopes", err)
	}
	_, err = pool.Exec(f.ctx, `UPDATE records SET envelope_id = 999999 WHERE partner_id = $1`, f.partner)
	if !isFK(err) {
		t.Errorf("record of an unknown envelope: %v, want foreign_key_violation", err)
	}
	_, err = pool.Exec(f.ctx, `DELETE FROM partners WHERE id = $1`, f.partner)
	if !isFK(err) {
		t.Errorf("delete a partner with records: %v, want foreign_key_violation", err)
	}
	if _, err := pool.Exec(f.ctx, `UPDATE records SET envelope_id = $2 WHERE partner_id = $1`, f.partner, out.ID); err != nil {
		t.Errorf("valid update refused: %v", err)
	}
}
