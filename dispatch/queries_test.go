package dispatch

import (
	"context"
	"testing"

	"github.com/payintake/payintake/internal/sqlfile"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// Every statement of dispatch/*.sql prepares against the migrated schema and
// is taken by some Go file: a misspelt column fails here, not on the rare
// path (a retry, an archived key) that runs it.
func TestEveryQueryPrepares(t *testing.T) {
	for _, err := range sqlfile.CheckDB(context.Background(), pgtest.Store(t).Pool(), ".", statements.Statements()) {
		t.Error(err)
	}
}
