package bench_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/bench"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// TestBenchSmoke runs the throughput benchmark at 10,000 rows, as CI's
// smoke check: the figures are logged, not asserted, but every outcome count
// and every result file is checked, so a broken pipeline fails it.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test: skipped by go test -short (.ci/run runs it)")
	}
	st := pgtest.Store(t)
	in := intake.New(st, nil)
	res, err := bench.Run(context.Background(), in, bench.Options{
		Rows: 10000, Dir: t.TempDir(), Partner: "bench", LatencyRuns: 3, Workbooks: true,
		Progress: func(step string) { t.Log(step) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rows %d, file %.1f MB: baseline %v (copy %v + upsert %v); first %v (%.2f× baseline, %.0f rows/s); unchanged %v; 1%% changed %v; latency median %v; peak RSS %.0f MB",
		res.Rows, float64(res.FileBytes)/1e6, res.Baseline, res.BaselineCopy, res.BaselineUpsert,
		res.First.Duration, res.First.Duration.Seconds()/res.Baseline.Seconds(), float64(res.Rows)/res.First.Duration.Seconds(),
		res.Unchanged.Duration, res.Changed1.Duration, res.LatencyMedian(), float64(res.PeakRSS)/(1<<20))
	if res.First.Counts["created"] != 10000 || res.Unchanged.Counts["unchanged"] != 10000 ||
		res.Changed1.Counts["updated"] != 100 || len(res.Latencies) != 3 {
		t.Errorf("unexpected outcomes: %+v", res)
	}
	if res.Baseline <= 0 || res.First.Duration <= 0 {
		t.Errorf("durations not measured: %+v", res)
	}
	w := res.Workbook
	if w == nil {
		t.Fatal("no workbook figures")
	}
	t.Logf("as CSV (%.1f MB) %v, as .xlsx (%.1f MB) %v (%.2f×); results: xlsx %v, its workbook (%.1f MB) built alone in %v; peak RSS %.0f, %.0f, %.0f MB",
		float64(w.CSVBytes)/1e6, w.CSV.Duration, float64(w.XLSXBytes)/1e6, w.XLSX.Duration, w.XLSX.Duration.Seconds()/w.CSV.Duration.Seconds(),
		w.ResultXLSX.Duration, float64(w.ResultBytes)/1e6, w.Build,
		float64(w.CSV.PeakRSS)/(1<<20), float64(w.XLSX.PeakRSS)/(1<<20), float64(w.ResultXLSX.PeakRSS)/(1<<20))
	for what, m := range map[string]bench.Measured{"CSV": w.CSV, "xlsx": w.XLSX, "results: xlsx": w.ResultXLSX} {
		if m.Counts["created"] != 10000 || m.Duration <= 0 {
			t.Errorf("%s: %+v, want 10000 created and a duration", what, m)
		}
	}
	if w.ResultBytes <= 0 || w.Build <= 0 || w.XLSXBytes <= 0 {
		t.Errorf("workbook figures not measured: %+v", w)
	}
}

// The generated workbook is the clean file's payroll: sent after the
// clean CSV, every row of it is unchanged.
func TestBenchWorkbookIsTheSamePayroll(t *testing.T) {
	st := pgtest.Store(t)
	in := intake.New(st, nil)
	ctx := context.Background()
	if err := st.AddPartner(ctx, records.Partner{ID: "bench"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []struct {
		name  string
		write func(io.Writer) (int64, error)
		want  string
	}{
		{"pay.csv", bench.File{Rows: 2000, Clean: true}.WriteTo, "map[created:2000]"},
		{"pay.xlsx", func(w io.Writer) (int64, error) { return bench.File{Rows: 2000}.WriteWorkbook(w, dir) }, "map[unchanged:2000]"},
	} {
		path := filepath.Join(dir, f.name)
		fh, err := os.Create(path)
		if err == nil {
			_, err = f.write(fh)
			if cerr := fh.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		_, out, err := in.IngestFile(ctx, "bench", path, "bench")
		if err != nil || fmt.Sprint(out.Counts) != f.want {
			t.Fatalf("%s: %v (%v), want %s", f.name, out.Counts, err, f.want)
		}
	}
}

// The generated file is messy but valid, and its keys are distinct.
func TestBenchFileIsValidPayroll(t *testing.T) {
	var messy, clean bytes.Buffer
	if _, err := (bench.File{Rows: 2000}).WriteTo(&messy); err != nil {
		t.Fatal(err)
	}
	if _, err := (bench.File{Rows: 2000, Clean: true}).WriteTo(&clean); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"$`, `"(`, ",usd,", " USD", "overtime"} {
		if !strings.Contains(messy.String(), want) {
			t.Errorf("messy file has no %q", want)
		}
	}
	// The baseline loads the clean file: it must hold the same rows as the
	// messy one, once normalised.
	norm := func(b []byte) []normalize.Record {
		r, err := normalize.NewReader(bytes.NewReader(b), normalize.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		var recs []normalize.Record
		for {
			row, err := r.Next()
			if err == io.EOF {
				return recs
			}
			if err != nil || row.Err != nil {
				t.Fatalf("line %d: %v %v", row.Line, err, row.Err)
			}
			recs = append(recs, row.Record)
		}
	}
	m, c := norm(messy.Bytes()), norm(clean.Bytes())
	if len(m) != len(c) {
		t.Fatalf("messy file has %d rows, clean %d", len(m), len(c))
	}
	for i := range m {
		if m[i].Hash() != c[i].Hash() {
			t.Fatalf("row %d differs: messy %v, clean %v", i+1, m[i].Values(), c[i].Values())
		}
	}
	rows, err := csv.NewReader(&clean).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2001 {
		t.Fatalf("%d lines, want 2001", len(rows))
	}
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		k := strings.Join(r[:3], "|")
		if seen[k] {
			t.Fatalf("key %s twice", k)
		}
		seen[k] = true
	}
}

// BenchmarkIngest10k ingests new 10,000-row files end to end (receive,
// normalise, apply, result file stored); go test -bench Ingest10k ./bench/.
func BenchmarkIngest10k(b *testing.B) {
	st := pgtest.Store(b)
	in := intake.New(st, nil)
	ctx := context.Background()
	if err := st.AddPartner(ctx, records.Partner{ID: "bench"}); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		b.StopTimer()
		path := filepath.Join(dir, fmt.Sprintf("run-%d.csv", i))
		fh, err := os.Create(path)
		if err == nil {
			_, err = (bench.File{Rows: 10000, Offset: i * 10001}).WriteTo(fh)
			fh.Close()
		}
		if err != nil {
			b.Fatal(err)
		}
		i++
		b.StartTimer()
		if _, out, err := in.IngestFile(ctx, "bench", path, "bench"); err != nil || out.Counts["created"] != 10000 {
			b.Fatalf("ingest: %v %v", out.Counts, err)
		}
	}
	b.ReportMetric(float64(10000*b.N)/b.Elapsed().Seconds(), "rows/s")
}
