// Package migrations holds payintake's PostgreSQL schema as ordered SQL files,
// embedded in the binary and applied with goose (see records.Migrate).
package migrations

import "embed"

// FS holds the SQL migration files, named NNNNN_description.sql: the
// baseline, 00001_baseline.sql (the whole schema, commented, in reading
// order), then the changes appended after it (not schema.sql, the dump
// of the schema they make, which is for reading).
//
//go:embed [0-9]*.sql
var FS embed.FS
