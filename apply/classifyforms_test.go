package apply_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// Every form of classify's statement (with and without the duplicate
// check, the emp and period_locks joins) prepares against the schema and
// processing's temp tables: most forms run only on rarer paths.
func TestEveryClassifyFormPrepares(t *testing.T) {
	ctx := context.Background()
	tx := beginWithTempTables(ctx, t, pgtest.Store(t).Pool())
	forms := apply.ClassifyForms()
	if len(forms) != 12 {
		t.Fatalf("%d forms of classify, want 3 duplicate checks × with and without each of 2 joins", len(forms))
	}
	named := regexp.MustCompile(`@([a-z_]+)`)
	for name, sql := range forms {
		args := pgx.NamedArgs{}
		for _, a := range named.FindAllStringSubmatch(sql, -1) {
			args[a[1]] = nil
		}
		q, _, err := args.RewriteQuery(ctx, tx.Conn(), sql, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := tx.Conn().Prepare(ctx, "", q); err != nil {
			t.Errorf("classify (%s) does not prepare: %v\n%s", name, err, q)
		}
	}
}
