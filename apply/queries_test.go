package apply_test

import (
	"context"
	"testing"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/internal/sqlfile"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// Every statement of apply/*.sql prepares against the migrated schema and
// is taken by some Go file: a misspelt column fails here, not on the rare
// path (a first file of a partner with a taken derived id) that runs it.
func TestEveryQueryPrepares(t *testing.T) {
	for _, err := range sqlfile.CheckDB(context.Background(), pgtest.Store(t).Pool(), ".", apply.Statements()) {
		t.Error(err)
	}
}
