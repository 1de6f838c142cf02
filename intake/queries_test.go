package intake

import (
	"context"
	"testing"

	"github.com/payintake/payintake/internal/sqlfile"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// Every statement of intake/*.sql prepares against the migrated schema
// and is taken by some Go file: a misspelt column fails here, not in the
// sweep for orphans that runs only after a crash.
func TestEveryQueryPrepares(t *testing.T) {
	ctx := context.Background()
	tx, err := pgtest.Store(t).Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, err := range sqlfile.Check(ctx, tx, ".", statements.Statements()) {
		t.Error(err)
	}
}
