package dispatch

import (
	"embed"

	"github.com/payintake/payintake/internal/sqlfile"
)

// dispatch's SQL lives in .sql files beside the Go file that runs it
// (ledger.sql beside ledger.go, …), loaded by internal/sqlfile and taken
// once, at package initialisation, with query("Name"). The column lists of
// runs and targets are fragments kept beside their scan functions.
// TestEveryQueryPrepares prepares each statement against the schema.

//go:embed *.sql
var sqlFiles embed.FS

var statements = sqlfile.MustLoad("dispatch", sqlFiles, map[string]string{
	"run_columns":    runColumns,
	"target_columns": targetColumns,
})

// query returns the named statement; an unknown name panics.
func query(name string) string { return statements.Query(name) }
