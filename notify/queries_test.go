package notify_test

import (
	"context"
	"testing"

	"github.com/payintake/payintake/internal/sqlfile"
	"github.com/payintake/payintake/notify"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// Every statement of notify/*.sql prepares against the migrated schema and
// is taken by some Go file: a misspelt column fails here, not on the rare
// path (a redelivery, a per-partner claim) that runs it.
func TestEveryQueryPrepares(t *testing.T) {
	for _, err := range sqlfile.CheckDB(context.Background(), pgtest.Store(t).Pool(), ".", notify.Statements()) {
		t.Error(err)
	}
}
