package main

import (
	"os"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
)

// TestMain is shared by every test of the command package.
// The reliability tests build the binary once; it is removed at the end.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	removeBinary()
	os.Exit(code)
}
