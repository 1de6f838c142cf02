package intake

import (
	"embed"

	"github.com/payintake/payintake/internal/sqlfile"
)

// intake's own SQL (the queue's and recovery's questions of the envelopes)
// lives in .sql files beside the Go that runs it, loaded by internal/sqlfile
// and taken once with query("Name"); TestEveryQueryPrepares prepares each
// against the schema. Everything else intake asks of the database goes
// through records.

//go:embed *.sql
var sqlFiles embed.FS

var statements = sqlfile.MustLoad("intake", sqlFiles, nil)

// query returns the named statement; an unknown name panics.
func query(name string) string { return statements.Query(name) }
