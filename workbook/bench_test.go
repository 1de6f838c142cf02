package workbook

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/payintake/payintake/normalize"
)

// benchRows is the size of the benchmark's payroll: a million lines.
var benchRows = func() int {
	if n, err := strconv.Atoi(os.Getenv("PAYINTAKE_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}()

// benchFiles writes the same payroll as CSV and as a workbook (excelize's
// stream writer, shared strings for the text as Excel keeps it: numbers
// and dates typed), once per process.
func benchFiles(b *testing.B) (csvPath, xlsxPath string) {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("payintake-workbook-bench-%d", benchRows))
	csvPath, xlsxPath = filepath.Join(dir, "pay.csv"), filepath.Join(dir, "pay.xlsx")
	if _, err := os.Stat(xlsxPath); err == nil {
		return csvPath, xlsxPath
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var csv bytes.Buffer
	csv.WriteString("employee_ref,pay_period,component,amount,currency,pay_date\n")
	f := excelize.NewFile()
	defer f.Close()
	date, _ := f.NewStyle(&excelize.Style{NumFmt: 14})
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		b.Fatal(err)
	}
	if err := sw.SetRow("A1", []any{"employee_ref", "pay_period", "component", "amount", "currency", "pay_date"}); err != nil {
		b.Fatal(err)
	}
	comps := []string{"BASE", "OVERTIME", "BONUS", "DEDUCTION"}
	for i := 0; i < benchRows; i++ {
		ref, comp := fmt.Sprintf("E%07d", i/4), comps[i%4]
		cents := 100000 + i%997*13
		amount := fmt.Sprintf("%d.%02d", cents/100, cents%100)
		fmt.Fprintf(&csv, "%s,2026-11,%s,%s,USD,2026-11-30\n", ref, comp, amount)
		cell, _ := excelize.CoordinatesToCellName(1, i+2)
		x, _ := strconv.ParseFloat(amount, 64)
		if err := sw.SetRow(cell, []any{ref, "2026-11", comp, x, "USD", excelize.Cell{StyleID: date, Value: 46356}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := sw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.SaveAs(xlsxPath); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(csvPath, csv.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return csvPath, xlsxPath
}

// BenchmarkRead reads and normalises the same payroll as CSV and as a
// workbook, and reports the rows read per second and the heap in use at
// the end of a read (the reader's bounded memory: it must not grow with
// the rows).
func BenchmarkRead(b *testing.B) {
	csvPath, xlsxPath := benchFiles(b)
	for _, tc := range []struct {
		name string
		path string
		open func(io.Reader) (*normalize.Reader, io.Closer, error)
	}{
		{"csv", csvPath, func(r io.Reader) (*normalize.Reader, io.Closer, error) {
			rd, err := normalize.NewReader(r, normalize.Settings{})
			return rd, io.NopCloser(nil), err
		}},
		{"xlsx", xlsxPath, func(r io.Reader) (*normalize.Reader, io.Closer, error) {
			sh, err := Open(r, Options{})
			if err != nil {
				return nil, nil, err
			}
			rd, err := normalize.NewRowsReader(sh, normalize.Settings{})
			return rd, sh, err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st, _ := os.Stat(tc.path)
			b.SetBytes(st.Size())
			var heap uint64
			for b.Loop() {
				f, err := os.Open(tc.path)
				if err != nil {
					b.Fatal(err)
				}
				rd, c, err := tc.open(f)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					row, err := rd.Next()
					if err == io.EOF {
						break
					}
					if err != nil || row.Err != nil {
						b.Fatalf("row %d: %v %v", n, err, row.Err)
					}
					n++
				}
				if n != benchRows {
					b.Fatalf("%d rows, want %d", n, benchRows)
				}
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap = max(heap, ms.HeapInuse)
				c.Close()
				f.Close()
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(heap)/(1<<20), "heapMiB")
		})
	}
}
