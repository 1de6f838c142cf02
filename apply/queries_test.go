package apply_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/internal/sqlfile"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// Every statement of apply/*.sql prepares against the migrated schema and
// processing's temporary tables, and is taken by some Go file: a misspelt
// column fails here, not on the rare path (a webhook, a first file of a
// partner with a taken derived id) that runs it.
func TestEveryQueryPrepares(t *testing.T) {
	ctx := context.Background()
	tx := beginWithTempTables(ctx, t, pgtest.Store(t).Pool())
	for _, err := range sqlfile.Check(ctx, tx, ".", apply.Statements()) {
		t.Error(err)
	}
}

// beginWithTempTables begins a transaction on db holding processing's
// temporary tables, rolled back when the test ends.
func beginWithTempTables(ctx context.Context, t *testing.T, db interface {
	Begin(context.Context) (pgx.Tx, error)
}) pgx.Tx {
	t.Helper()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
	for _, ddl := range apply.TempTables {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	return tx
}
