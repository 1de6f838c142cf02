package migrations_test

import (
	"os"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// The tests of this package run the SQL functions the migrations define
// against the Go code that must agree with them (one rule, two languages).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
