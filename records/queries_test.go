package records_test

import (
	"context"
	"testing"

	"github.com/payintake/payintake/internal/sqlfile"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// Every statement of records/*.sql is prepared against the migrated schema
// and taken by some Go file: a misspelt column, a missing fragment or a
// statement that no longer parses fails here, not on the rare path that
// runs it, and none is left behind when its caller goes.
func TestEveryQueryPrepares(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	stmts := records.Statements()
	if len(stmts) < 100 {
		t.Fatalf("only %d statements loaded from records/*.sql: the loader misses some", len(stmts))
	}
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// The temp table the employee import's statements read.
	if _, err := tx.Exec(ctx, stmts["CreateEmployeeImportTable"]); err != nil {
		t.Fatal(err)
	}
	for _, err := range sqlfile.Check(ctx, tx, ".", stmts) {
		t.Error(err)
	}
	t.Logf("%d statements prepared", len(stmts))
}
