package apply

import (
	"embed"

	"github.com/payintake/payintake/internal/sqlfile"
)

// The SQL apply runs as written lives in .sql files beside the Go file that
// runs it (temptables.sql beside temptables.go, …), loaded by
// internal/sqlfile and taken once, at package initialisation, with
// query("Name"); TestEveryQueryPrepares prepares each against the schema.
// The statements composed from parts at run time (classify's forms, the
// apply statements a file's outcomes need) are still built in Go.

//go:embed *.sql
var sqlFiles embed.FS

var statements = sqlfile.MustLoad("apply", sqlFiles, nil)

// query returns the named statement; an unknown name panics.
func query(name string) string { return statements.Query(name) }
