package main

import (
	"os"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// TestMain is shared by every test of the command package.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
