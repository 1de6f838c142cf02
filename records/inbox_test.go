package records_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// The partner id rule in Go and the partners table's CHECK agree.
func TestPartnerIDRuleParity(t *testing.T) {
	st := pgtest.Store(t)
	ctx := t.Context()
	for _, id := range []string{"acme", "a", "0x", "acme-co.uk_2", strings.Repeat("a", 63), strings.Repeat("a", 64),
		"", "Acme", "-acme", ".acme", "_a", "ac me", "acme\n", "acmé", "a/b", "a\\b", "a;b"} {
		var inTable bool
		err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO partners (id) VALUES ($1)`, id)
			if err == nil {
				inTable = true
				return errors.New("roll back")
			}
			return err
		})
		var pgErr *pgconn.PgError
		if !inTable && !(errors.As(err, &pgErr) && pgErr.Code == "23514") {
			t.Fatalf("insert %q: %v", id, err)
		}
		if got := records.ValidPartnerID(id); got != inTable {
			t.Errorf("%q: Go says %v, the table says %v", id, got, inTable)
		}
	}
}
