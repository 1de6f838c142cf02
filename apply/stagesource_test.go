package apply

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/payintake/payintake/records"
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

func (c *cycleRows) Next() (records.StagedRow, error) {
	if c.i == c.n {
		return records.StagedRow{}, io.EOF
	}
	c.i++
	comps := [...]string{"BASE", "OVERTIME", "BONUS", "DEDUCTION", "ALLOWANCE"}
	return records.StagedRow{Row: c.i, Line: c.i + 1, EmployeeRef: "E" + strconv.Itoa(c.i/5), PayPeriod: "2026-03",
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
				var err error
				if lines, err = newResultLines(b.TempDir()); err != nil {
					b.Fatal(err)
				}
				defer lines.close()
			}
			c0 := cpuNanos(b)
			src := newStageSource(context.Background(), &cycleRows{n: b.N}, lines, nil, nil)
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

// Sources that share a free list (the Store's blocks) write each its own
// rows, whichever source's block a producer takes up again: three at once
// give the bytes each gives alone, with a free list of its own.
func TestStageSourcesShareBlocks(t *testing.T) {
	ctx := context.Background()
	read := func(rows RowSource, free chan []byte) ([]byte, error) {
		src := newStageSource(ctx, rows, nil, nil, free)
		defer src.close()
		var b bytes.Buffer
		_, err := io.Copy(&b, src)
		return b.Bytes(), err
	}
	// Rows from different starts: every source's text is different.
	sizes := []struct{ from, to int }{{0, 40000}, {100000, 125000}, {200000, 260000}}
	want := make([][]byte, len(sizes))
	for i, sz := range sizes {
		b, err := read(&cycleRows{i: sz.from, n: sz.to}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 3*stageBlockSize {
			t.Fatalf("source %d: %d bytes, want several blocks", i, len(b))
		}
		want[i] = b
	}
	free := make(chan []byte, stageBlocks+2)
	for round := range 3 {
		got := make([][]byte, len(sizes))
		errs := make([]error, len(sizes))
		var wg sync.WaitGroup
		for i, sz := range sizes {
			wg.Go(func() { got[i], errs[i] = read(&cycleRows{i: sz.from, n: sz.to}, free) })
		}
		wg.Wait()
		for i := range sizes {
			if errs[i] != nil {
				t.Fatalf("round %d, source %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("round %d, source %d: %d bytes differ from the %d it gives alone", round, i, len(got[i]), len(want[i]))
			}
		}
	}
	if len(free) == 0 {
		t.Fatal("no block was given back to the shared free list")
	}
}
