package dispatch

import (
	"context"
	"testing"

	"github.com/payintake/payintake/internal/sqlfile"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// Every statement of dispatch/*.sql prepares against the migrated schema
// and is taken by some Go file: a misspelt column fails here, not on the
// rare path (a retry, an archived key) that runs it.
func TestEveryQueryPrepares(t *testing.T) {
	ctx := context.Background()
	stmts := statements.Statements()
	tx, err := pgtest.Store(t).Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, err := range sqlfile.Prepare(ctx, tx, stmts) {
		t.Error(err)
	}
	unused, err := sqlfile.Unused(".", stmts)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range unused {
		t.Errorf("statement %s is in dispatch/*.sql but no Go file takes it with query(%q)", name, name)
	}
	if len(stmts) < 30 {
		t.Errorf("only %d statements loaded from dispatch/*.sql: the loader misses some", len(stmts))
	}
}
