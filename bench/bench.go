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
	"runtime/debug"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/workbook"
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
	// Workbooks also measures the same payroll as CSV and as .xlsx, and a
	// result built as a workbook (Result.Workbook).
	Workbooks bool
	// XLSXFirst ingests the .xlsx before the CSV (Workbooks): the records
	// table grows with each step, so comparisons alternate the order.
	XLSXFirst bool
	// Progress, if set, is told what runs now.
	Progress func(step string)
}

// Measured is one measured ingest.
type Measured struct {
	Duration time.Duration  `json:"duration_ns"`
	Counts   map[string]int `json:"counts"`
	// PeakRSS is the process's peak resident set during this ingest alone
	// (VmHWM reset before it), in bytes; 0 where not measured.
	PeakRSS int64 `json:"peak_rss_bytes,omitempty"`
	// CPU is this process's CPU time (user and system) during the ingest,
	// where measured: on a shared machine it moves far less than the
	// elapsed time. PostgreSQL's backends are not in it.
	CPU time.Duration `json:"cpu_ns,omitempty"`
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
	// PeakRSS is the process's peak resident set (VmHWM), in bytes, over
	// the steps above (before Workbook's).
	PeakRSS int64 `json:"peak_rss_bytes"`
	// Workbook is what Options.Workbooks measured (nil: not asked).
	Workbook *WorkbookResult `json:"workbook,omitempty"`
}

// WorkbookResult compares the same payroll (File.Clean's rows) as CSV and
// as an .xlsx workbook (File.WriteWorkbook), each the first file of a
// partner of its own, so both are read and applied the same way (a first
// file: every row created); and times a result built as a workbook.
type WorkbookResult struct {
	CSVBytes  int64    `json:"csv_bytes"`
	XLSXBytes int64    `json:"xlsx_bytes"`
	CSV       Measured `json:"csv"`
	XLSX      Measured `json:"xlsx"`
	// ResultXLSX is the CSV's first submission for a partner whose profile
	// says results: xlsx: the same work as CSV's, plus the result workbook
	// built from the stored lines and stored in the processing
	// transaction, and then written out from the stored bytes.
	ResultXLSX Measured `json:"result_xlsx"`
	// Build is the result workbook built once more, alone, from the stored
	// lines (read from the store as processing reads them); ResultBytes
	// is its size.
	Build       time.Duration `json:"build_ns"`
	BuildCPU    time.Duration `json:"build_cpu_ns,omitempty"`
	BuildRSS    int64         `json:"build_peak_rss_bytes,omitempty"`
	ResultBytes int64         `json:"result_bytes"`
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
		if err := addPartner(ctx, in, opt.Partner, ""); err != nil {
			return res, err
		}
	} else if err != nil {
		return res, fmt.Errorf("bench: read partner: %w", err)
	}
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	gen := func(name string, write func(io.Writer) (int64, error)) (string, int64, error) {
		p := filepath.Join(opt.Dir, name)
		out, err := os.Create(p)
		if err != nil {
			return "", 0, fmt.Errorf("bench: %w", err)
		}
		n, err := write(out)
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
	first, size, err := gen(fmt.Sprintf("bench-%d-%s-first.csv", n, tag), File{Rows: n}.WriteTo)
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
	changed, _, err := gen(fmt.Sprintf("bench-%d-%s-changed.csv", n, tag), File{Rows: n, ChangeEvery: 100}.WriteTo)
	if err != nil {
		return res, err
	}
	defer os.Remove(changed)
	clean, cleanSize, err := gen(fmt.Sprintf("bench-%d-%s-clean.csv", n, tag), File{Rows: n, Clean: true}.WriteTo)
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
		p, _, err := gen(fmt.Sprintf("bench-%d-%s-latency-%d.csv", n, tag, i), File{Rows: n, Offset: (i + 1) * (n + 1)}.WriteTo)
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
	if opt.Workbooks {
		w, err := runWorkbooks(ctx, in, opt, progress, tag, clean, cleanSize, gen)
		if err != nil {
			return res, err
		}
		res.Workbook = &w
	}
	return res, nil
}

// runWorkbooks measures WorkbookResult: the clean file (at clean) and the
// same rows as a workbook, each ingested as the first file of a new
// partner; then the clean file for a partner whose results are workbooks.
func runWorkbooks(ctx context.Context, in *intake.Intake, opt Options, progress func(string), tag, clean string, cleanSize int64,
	gen func(string, func(io.Writer) (int64, error)) (string, int64, error)) (WorkbookResult, error) {
	w := WorkbookResult{CSVBytes: cleanSize}
	n := opt.Rows
	progress("generate the workbook")
	book, size, err := gen(fmt.Sprintf("bench-%d-%s-book.xlsx", n, tag), func(w io.Writer) (int64, error) {
		return File{Rows: n, Clean: true}.WriteWorkbook(w, opt.Dir)
	})
	if err != nil {
		return w, err
	}
	defer os.Remove(book)
	w.XLSXBytes = size
	created := map[string]int{"created": n}
	steps := []struct {
		what, partner, path string
		results             string
		run                 *Measured
	}{
		{"the payroll as CSV, first file", opt.Partner + "-csv", clean, "", &w.CSV},
		{"the payroll as .xlsx, first file", opt.Partner + "-xlsx", book, "", &w.XLSX},
		{"the payroll as CSV, results: xlsx", opt.Partner + "-book", clean, normalize.ResultsXLSX, &w.ResultXLSX},
	}
	if opt.XLSXFirst {
		steps[0], steps[1] = steps[1], steps[0]
	}
	var resultXLSX records.Envelope
	for _, s := range steps {
		progress(s.what)
		if err := addPartner(ctx, in, s.partner, s.results); err != nil {
			return w, err
		}
		o := opt
		o.Partner = s.partner
		var out records.Envelope
		resetPeakRSS()
		cpu := CPUTime()
		*s.run, out, err = ingestEnvelope(ctx, in, o, s.path, n)
		s.run.PeakRSS, s.run.CPU = PeakRSS(), CPUTime()-cpu
		if err != nil {
			return w, err
		}
		if err := checkCounts(s.what, s.run.Counts, created); err != nil {
			return w, err
		}
		if s.results != "" {
			resultXLSX = out
		}
	}
	progress("the result workbook, built alone")
	resetPeakRSS()
	start, cpu := time.Now(), CPUTime()
	var built countWriter
	built.w = io.Discard
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(in.Store.WritePlainResult(ctx, resultXLSX.ID, pw)) }()
	err = workbook.ResultWorkbook(&built, pr, opt.Dir)
	pr.CloseWithError(errors.New("the workbook is built"))
	w.Build, w.BuildCPU, w.BuildRSS, w.ResultBytes = time.Since(start), CPUTime()-cpu, PeakRSS(), built.n
	if err != nil {
		return w, fmt.Errorf("bench: build the result workbook: %w", err)
	}
	if built.n != resultXLSX.ResultSize {
		return w, fmt.Errorf("bench: the result workbook built again has %d bytes, the stored one %d", built.n, resultXLSX.ResultSize)
	}
	return w, nil
}

// addPartner adds partner id with default settings and, when results is
// not empty, a profile asking for results in that format.
func addPartner(ctx context.Context, in *intake.Intake, id, results string) error {
	if err := in.Store.AddPartner(ctx, records.Partner{ID: id, Name: "benchmark"}); err != nil {
		return fmt.Errorf("bench: add partner: %w", err)
	}
	if results == "" {
		return nil
	}
	_, err := in.Store.SetPartnerProfile(ctx, id, "results: "+results+"\n", records.PartnerProfile{Results: results},
		records.PartnerUpdate{}, "bench", records.ViaCLI)
	if err != nil {
		return fmt.Errorf("bench: set partner profile: %w", err)
	}
	return nil
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
	run, _, err := ingestEnvelope(ctx, in, opt, path, rows)
	return run, err
}

// ingestEnvelope is ingest, also returning the envelope holding the
// outcome. A result served as a workbook is written as the partner gets
// it (NAME.result.xlsx) and checked for its size.
func ingestEnvelope(ctx context.Context, in *intake.Intake, opt Options, path string, rows int) (Measured, records.Envelope, error) {
	start := time.Now()
	got, out, err := in.IngestFile(ctx, opt.Partner, path, "bench")
	if err != nil {
		return Measured{}, out, fmt.Errorf("bench: %w", err)
	}
	if got.Status != records.StatusProcessed {
		return Measured{}, out, fmt.Errorf("bench: %s: status %s, want processed", filepath.Base(path), got.Status)
	}
	final := filepath.Join(opt.Dir, records.ServedResultName(got.FileName, out.ResultFormat))
	if err := writeFileAtomic(final, func(w io.Writer) error { return in.Store.WriteResult(ctx, got.ID, w) }); err != nil {
		return Measured{}, out, fmt.Errorf("bench: write result: %w", err)
	}
	run := Measured{Duration: time.Since(start), Counts: out.Counts}
	defer os.Remove(final)
	// Outside the clock: the result file has a header and one line per
	// row; a workbook, the size noted when it was built.
	if out.ResultFormat == normalize.ResultsXLSX {
		fi, err := os.Stat(final)
		if err != nil || fi.Size() != out.ResultSize {
			return run, out, fmt.Errorf("bench: result workbook %s: %v (%v), want %d bytes", final, fi, err, out.ResultSize)
		}
		return run, out, nil
	}
	lines, err := countLines(final)
	if err != nil {
		return run, out, fmt.Errorf("bench: read result: %w", err)
	}
	if lines != rows+1 {
		return run, out, fmt.Errorf("bench: result file %s has %d lines, want %d", final, lines, rows+1)
	}
	return run, out, nil
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

// resetPeakRSS returns the memory the heap no longer uses to the OS and
// resets the process's peak resident set (VmHWM) to what it holds now
// (Linux's /proc/self/clear_refs), so the next PeakRSS is a step's own.
// Where that is not possible the peak stays the process's.
func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// CPUTime is the CPU time (user and system) this process has used, or 0
// where that is not available.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
