// Package migrations holds payintake's PostgreSQL schema as ordered SQL files,
// embedded in the binary and applied with goose (see records.Migrate).
package migrations

import "embed"

// FS holds the SQL migration files, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS
