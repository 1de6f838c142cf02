package apply

import (
	"embed"

	"github.com/payintake/payintake/internal/sqlfile"
)

// The SQL apply runs as written lives in .sql files beside the Go file that
// runs it (temptables.sql beside temptables.go, …), loaded by
// internal/sqlfile and taken once, at package initialisation, with
// query("Name"); TestEveryQueryPrepares prepares each against the schema.
// The statements composed from parts at run time stay in Go, each built
// per strategy or per file from the parts it needs: classify's forms
// (classifySQL), onboardSQL(created), insertRecordsSQL(from),
// analyzeStageSQL(rows), repeatedKeysSQL(table), the exceptions insert
// (its codes and field lists from Go), and the COPY commands; so do the
// planner switches around one probing statement (probeRecords), two SET
// LOCALs sent as one round trip, which a prepared statement cannot be.

//go:embed *.sql
var sqlFiles embed.FS

var statements = sqlfile.MustLoad("apply", sqlFiles, nil)

// query returns the named statement; an unknown name panics.
func query(name string) string { return statements.Query(name) }
