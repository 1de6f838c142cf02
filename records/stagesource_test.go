package records

import (
	"context"
	"io"
	"strconv"
	"syscall"
	"testing"
)

// cpuNanos is the process's CPU time (user + system).
func cpuNanos(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// cycleRows yields n valid rows shaped like a payroll export's, with
// increasing row numbers.
type cycleRows struct{ i, n int }

func (c *cycleRows) Next() (StagedRow, error) {
	if c.i == c.n {
		return StagedRow{}, io.EOF
	}
	c.i++
	comps := [...]string{"BASE", "OVERTIME", "BONUS", "DEDUCTION", "ALLOWANCE"}
	return StagedRow{Row: c.i, Line: c.i + 1, EmployeeRef: "E" + strconv.Itoa(c.i/5), PayPeriod: "2026-03",
		Component: comps[c.i%5], Amount: "4285.19", Currency: "USD", Hash: make([]byte, 32)}, nil
}

// BenchmarkStageSource is the Go side of staging a row (normalising aside):
// its COPY text, and its result line when composeLines; cpu-ns/row is the
// process's CPU time (the file writes' system time too) per row.
func BenchmarkStageSource(b *testing.B) {
	for _, composeLines := range []bool{false, true} {
		b.Run("lines="+strconv.FormatBool(composeLines), func(b *testing.B) {
			var lines *resultLines
			if composeLines {
				lines = newResultLines(b.TempDir())
				defer lines.close()
			}
			c0 := cpuNanos(b)
			src := newStageSource(context.Background(), &cycleRows{n: b.N}, lines, nil)
			if _, err := io.Copy(io.Discard, src); err != nil {
				b.Fatal(err)
			}
			src.close()
			b.ReportMetric(float64(cpuNanos(b)-c0)/float64(b.N), "cpu-ns/row")
			if composeLines && !lines.ok() {
				b.Fatal("lines dropped")
			}
		})
	}
}
