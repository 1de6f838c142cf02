package migrations_test

import (
	"os"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// The tests of this package check the migrated schema against schema.sql.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
