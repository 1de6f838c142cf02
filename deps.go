//go:build tools

package tools

import (
	_ "github.com/gocarina/gocsv"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/pkg/sftp"
	_ "github.com/pressly/goose/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/riverqueue/river"
	_ "github.com/riverqueue/river/riverdriver/riverpgxv5"
	_ "github.com/shopspring/decimal"
	_ "golang.org/x/crypto/ssh"
	_ "golang.org/x/text/currency"
	_ "golang.org/x/text/encoding/unicode"
)
