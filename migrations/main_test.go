package migrations_test

import (
	"os"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// The tests of this package check the migrated schema: schema.sql states
// it, and what the migrations convert keeps its meaning.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
