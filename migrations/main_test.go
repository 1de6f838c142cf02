package migrations_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// The tests of this package run the SQL functions the migrations define
// against the Go code that must agree with them (one rule, two languages).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// texts runs q, whose one column is text, and returns its rows in order;
// fewer or more than n rows fail the test (what names the function run).
func texts(ctx context.Context, t *testing.T, db *pgxpool.Pool, n int, what, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(out) != n {
		t.Fatalf("%s over %d inputs: %d answers, %v", what, n, len(out), err)
	}
	return out
}
