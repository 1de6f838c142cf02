package records_test

import (
	"context"
	"os"
	"testing"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgserver/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The review report escapes values in SQL (csv_safe), the result file in Go
// (normalize.SafeCell): both must escape the same values.
func TestCSVSafeMatchesSafeCell(t *testing.T) {
	st := pgtest.Store(t)
	for _, v := range []string{"", "E001", "=SUM(A1)", "+1", "-5", "-12,50", "+3.25", "-1e3", "@x", "\tx", "\rx",
		"-", "+", "1-2", "-12,", "--1", "=1+1", "-0012", "+1.2.3"} {
		var got string
		if err := st.Pool().QueryRow(context.Background(), `SELECT csv_safe($1)`, v).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := normalize.SafeCell(v); got != want {
			t.Errorf("csv_safe(%q) = %q, SafeCell gives %q", v, got, want)
		}
	}
}
