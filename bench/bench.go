// Package bench measures payintake's ingest end to end against what
// PostgreSQL itself needs for the same rows (COPY + one upsert), on files it
// generates (File). `payintake bench` runs it; TestBenchSmoke is CI's check.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/records"
)

// Options configures one benchmark run of one file size.
type Options struct {
	Rows    int
	Dir     string // scratch folder for the generated files and result files
	Partner string // created (with default settings) if it does not exist
	// LatencyRuns, when > 0, ingests that many more files of Rows new rows
	// each and reports the median time from "upload closed" to "result file
	// written".
	LatencyRuns int
	// Progress, if set, is told what runs now.
	Progress func(step string)
}

// Measured is one measured ingest.
type Measured struct {
	Duration time.Duration  `json:"duration_ns"`
	Counts   map[string]int `json:"counts"`
}

// Result is what one Run measured.
type Result struct {
	Rows      int   `json:"rows"`
	FileBytes int64 `json:"file_bytes"`
	// Baseline is PostgreSQL's own COPY of the same rows (already clean)
	// into a plain table plus one INSERT ... ON CONFLICT DO UPDATE into a
	// table with the records' unique key, committed.
	Baseline       time.Duration `json:"baseline_ns"`
	BaselineCopy   time.Duration `json:"baseline_copy_ns"`
	BaselineUpsert time.Duration `json:"baseline_upsert_ns"`
	// First is the file's first submission (every row created), Unchanged
	// the same bytes under a new name (every row unchanged), Changed1 a new
	// name with 1% of the amounts changed.
	First     Measured   `json:"first"`
	Unchanged Measured   `json:"unchanged"`
	Changed1  Measured   `json:"changed_1pct"`
	Latencies []Measured `json:"latencies,omitempty"`
	// PeakRSS is the process's peak resident set (VmHWM), in bytes.
	PeakRSS int64 `json:"peak_rss_bytes"`
}

// LatencyMedian is the median of the latency runs, 0 if none.
func (r Result) LatencyMedian() time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	d := make([]time.Duration, len(r.Latencies))
	for i, l := range r.Latencies {
		d[i] = l.Duration
	}
	slices.Sort(d)
	if len(d)%2 == 1 {
		return d[len(d)/2]
	}
	return (d[len(d)/2-1] + d[len(d)/2]) / 2
}

// Run generates files of opt.Rows rows, measures the baseline and ingests
// them with in end to end (receive, read, normalise, hash, apply, result
// file written to opt.Dir), checking every outcome count.
func Run(ctx context.Context, in *intake.Intake, opt Options) (Result, error) {
	res := Result{Rows: opt.Rows}
	progress := opt.Progress
	if progress == nil {
		progress = func(string) {}
	}
	if opt.Rows <= 0 {
		return res, errors.New("bench: the number of rows must be positive")
	}
	if _, err := in.Store.Partner(ctx, opt.Partner); errors.Is(err, records.ErrNotFound) {
		if err := in.Store.AddPartner(ctx, records.Partner{ID: opt.Partner, Name: "benchmark"}); err != nil {
			return res, fmt.Errorf("bench: add partner: %w", err)
		}
	} else if err != nil {
		return res, fmt.Errorf("bench: read partner: %w", err)
	}
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	gen := func(name string, f File) (string, int64, error) {
		p := filepath.Join(opt.Dir, name)
		out, err := os.Create(p)
		if err != nil {
			return "", 0, fmt.Errorf("bench: %w", err)
		}
		n, err := f.WriteTo(out)
		if err == nil {
			// Written out now, outside the clock: left to the kernel, the
			// four files of a 1,000,000-row run (230 MB) would be written
			// back ~30 s later, inside whichever step ran then.
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", 0, fmt.Errorf("bench: write %s: %w", name, err)
		}
		return p, n, nil
	}
	n := opt.Rows
	progress("generate files")
	first, size, err := gen(fmt.Sprintf("bench-%d-%s-first.csv", n, tag), File{Rows: n})
	if err != nil {
		return res, err
	}
	res.FileBytes = size
	defer os.Remove(first)
	again := filepath.Join(opt.Dir, fmt.Sprintf("bench-%d-%s-again.csv", n, tag))
	if err := copyFile(first, again); err != nil {
		return res, err
	}
	defer os.Remove(again)
	changed, _, err := gen(fmt.Sprintf("bench-%d-%s-changed.csv", n, tag), File{Rows: n, ChangeEvery: 100})
	if err != nil {
		return res, err
	}
	defer os.Remove(changed)
	clean, _, err := gen(fmt.Sprintf("bench-%d-%s-clean.csv", n, tag), File{Rows: n, Clean: true})
	if err != nil {
		return res, err
	}
	defer os.Remove(clean)

	progress("baseline")
	if res.BaselineCopy, res.BaselineUpsert, err = baseline(ctx, in.Store.Pool(), clean, tag, n); err != nil {
		return res, err
	}
	res.Baseline = res.BaselineCopy + res.BaselineUpsert

	nChanged := (n + 99) / 100
	steps := []struct {
		what, path string
		run        *Measured
		want       map[string]int
	}{
		{"first submission", first, &res.First, map[string]int{"created": n}},
		{"resubmission, unchanged", again, &res.Unchanged, map[string]int{"unchanged": n}},
		{"resubmission, 1% changed", changed, &res.Changed1, map[string]int{"updated": nChanged, "unchanged": n - nChanged}},
	}
	for _, s := range steps {
		progress(s.what)
		if *s.run, err = ingest(ctx, in, opt, s.path, n); err != nil {
			return res, err
		}
		if err := checkCounts(s.what, s.run.Counts, s.want); err != nil {
			return res, err
		}
	}
	for i := 0; i < opt.LatencyRuns; i++ {
		progress(fmt.Sprintf("latency run %d of %d", i+1, opt.LatencyRuns))
		p, _, err := gen(fmt.Sprintf("bench-%d-%s-latency-%d.csv", n, tag, i), File{Rows: n, Offset: (i + 1) * (n + 1)})
		if err != nil {
			return res, err
		}
		run, err := ingest(ctx, in, opt, p, n)
		os.Remove(p)
		if err != nil {
			return res, err
		}
		if err := checkCounts("latency run", run.Counts, map[string]int{"created": n}); err != nil {
			return res, err
		}
		res.Latencies = append(res.Latencies, run)
	}
	res.PeakRSS = PeakRSS()
	return res, nil
}

func checkCounts(what string, got, want map[string]int) error {
	for k, v := range got {
		if want[k] != v {
			return fmt.Errorf("bench: %s: outcome counts %v, want %v", what, got, want)
		}
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("bench: %s: outcome counts %v, want %v", what, got, want)
		}
	}
	return nil
}

// ingest ingests path as an upload would and writes its result file
// next to it, atomically, like `payintake ingest --results-dir`. The clock
// starts when the upload is closed (the file is complete) and stops when the
// result file is in place.
func ingest(ctx context.Context, in *intake.Intake, opt Options, path string, rows int) (Measured, error) {
	start := time.Now()
	got, out, err := in.IngestFile(ctx, opt.Partner, path, "bench")
	if err != nil {
		return Measured{}, fmt.Errorf("bench: %w", err)
	}
	if got.Status != records.StatusProcessed {
		return Measured{}, fmt.Errorf("bench: %s: status %s, want processed", filepath.Base(path), got.Status)
	}
	final := filepath.Join(opt.Dir, records.ResultName(got.FileName))
	if err := writeFileAtomic(final, func(w io.Writer) error { return in.Store.WriteResult(ctx, got.ID, w) }); err != nil {
		return Measured{}, fmt.Errorf("bench: write result: %w", err)
	}
	run := Measured{Duration: time.Since(start), Counts: out.Counts}
	defer os.Remove(final)
	// Outside the clock: the result file has a header and one line per row.
	lines, err := countLines(final)
	if err != nil {
		return run, fmt.Errorf("bench: read result: %w", err)
	}
	if lines != rows+1 {
		return run, fmt.Errorf("bench: result file %s has %d lines, want %d", final, lines, rows+1)
	}
	return run, nil
}

func writeFileAtomic(final string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(final), ".result-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 256<<10)
	if err := write(bw); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), final)
}

func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	n := 0
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("bench: copy file: %w", err)
	}
	// Written out before the clock starts, as the generated files are.
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("bench: copy file: %w", err)
	}
	return out.Close()
}

// baseline measures what PostgreSQL itself needs for the same rows: COPY of
// the clean CSV into a plain table, then one INSERT ... ON CONFLICT DO
// UPDATE into a table keyed like records, in one committed transaction. The
// tables are dropped afterwards.
func baseline(ctx context.Context, pool *pgxpool.Pool, clean, tag string, rows int) (cp, up time.Duration, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("bench baseline: %w", err)
	}
	defer conn.Release()
	src, dst := "bench_copy_"+tag, "bench_target_"+tag
	ddl := `CREATE TABLE ` + src + ` (employee_ref text, pay_period text, component text, amount numeric,
			currency text, hours numeric, rate numeric, pay_date date);
		CREATE TABLE ` + dst + ` (id bigserial PRIMARY KEY, partner_id text NOT NULL, employee_ref text NOT NULL,
			pay_period text NOT NULL, component text NOT NULL, amount numeric NOT NULL, currency text NOT NULL,
			hours numeric, rate numeric, pay_date date, UNIQUE (partner_id, employee_ref, pay_period, component))`
	if _, err := conn.Exec(ctx, ddl); err != nil {
		return 0, 0, fmt.Errorf("bench baseline: create tables: %w", err)
	}
	defer func() {
		if _, derr := conn.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+src+`, `+dst); derr != nil && err == nil {
			err = fmt.Errorf("bench baseline: drop tables: %w", derr)
		}
	}()
	f, err := os.Open(clean)
	if err != nil {
		return 0, 0, fmt.Errorf("bench baseline: %w", err)
	}
	defer f.Close()
	start := time.Now()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		ct, err := tx.Conn().PgConn().CopyFrom(ctx, f, `COPY `+src+` FROM STDIN (FORMAT csv, HEADER true)`)
		if err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		if ct.RowsAffected() != int64(rows) {
			return fmt.Errorf("copy: %d rows, want %d", ct.RowsAffected(), rows)
		}
		cp = time.Since(start)
		ct, err = tx.Exec(ctx, `INSERT INTO `+dst+` (partner_id, employee_ref, pay_period, component, amount, currency, hours, rate, pay_date)
			SELECT 'bench', employee_ref, pay_period, component, amount, currency, hours, rate, pay_date FROM `+src+`
			ON CONFLICT (partner_id, employee_ref, pay_period, component) DO UPDATE SET amount = excluded.amount,
				currency = excluded.currency, hours = excluded.hours, rate = excluded.rate, pay_date = excluded.pay_date`)
		if err != nil {
			return fmt.Errorf("upsert: %w", err)
		}
		if ct.RowsAffected() != int64(rows) {
			return fmt.Errorf("upsert: %d rows, want %d", ct.RowsAffected(), rows)
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("bench baseline: %w", err)
	}
	total := time.Since(start)
	return cp, total - cp, nil
}

// PeakRSS returns the process's peak resident set size (VmHWM in
// /proc/self/status) in bytes, or 0 where that is not available.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(l, []byte("VmHWM:")); ok {
			f := bytes.Fields(v)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}
