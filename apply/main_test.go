package apply_test

import (
	"os"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
