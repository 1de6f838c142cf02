package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/payintake/payintake/bench"
	"github.com/payintake/payintake/intake"
)

const benchUsage = `payintake bench [--rows 10000,100000,1000000] [--latency-runs 7] [--workbooks=false] [--xlsx-first] [--cpuprofile DIR] [--in-process]

Generates payroll files of each size and, against one database, measures the
baseline (PostgreSQL's own COPY of the same rows plus one INSERT ... ON
CONFLICT DO UPDATE) and payintake's ingest end to end (receive, read,
normalise, hash, apply, result file written): a first submission, the same
bytes under a new name (all unchanged) and a 1% changed resubmission. With
--workbooks (the default), the same payroll as CSV and as .xlsx, each a
first file (the CSV first; --xlsx-first: the .xlsx), and a first file
whose result is built as a workbook. Each
size runs in a fresh subprocess so its peak memory (VmHWM) is its own.

Without --database-url and without an explicit --data-dir (or
PAYINTAKE_DATA_DIR), the run uses a throwaway embedded cluster in a temp
folder, removed afterwards. Otherwise it adds partners named bench-* to that
database and leaves their records there.
`

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("bench", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchUsage); fs.PrintDefaults() }
	sizes := fs.String("rows", "10000,100000,1000000", "comma-separated file sizes in data rows")
	latencyRuns := fs.Int("latency-runs", 7, "extra ingests of new files for the latency median, for sizes up to 10000 rows")
	profDir := fs.String("cpuprofile", "", "write a CPU profile of each size's ingests to DIR/cpu-ROWS.pprof")
	inProcess := fs.Bool("in-process", false, "run every size in this process (peak memory then mixes sizes)")
	workbooks := fs.Bool("workbooks", true, "also measure the same payroll as CSV and as .xlsx, and a result built as a workbook")
	xlsxFirst := fs.Bool("xlsx-first", false, "with --workbooks, ingest the .xlsx before the CSV (alternate runs to compare)")
	child := fs.Bool("child", false, "internal: run one size and print its result as JSON")
	partner := fs.String("partner", "", "internal: partner ID the child uses")
	scratch := fs.String("scratch", "", "folder for generated files (default: a temp folder)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("bench takes no arguments besides flags")
	}
	var rows []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return usagef("bench: --rows wants positive numbers separated by commas, got %q", *sizes)
		}
		rows = append(rows, n)
	}
	if *child {
		if len(rows) != 1 || *partner == "" || *scratch == "" || g.databaseURL == "" {
			return usagef("bench --child is internal")
		}
		opt := bench.Options{Rows: rows[0], Partner: *partner, Dir: *scratch, LatencyRuns: *latencyRuns, Workbooks: *workbooks, XLSXFirst: *xlsxFirst}
		return benchChild(ctx, g, opt, *profDir, stdout, stderr)
	}

	explicitDir := os.Getenv("PAYINTAKE_DATA_DIR") != ""
	fs.Visit(func(f *flag.Flag) { explicitDir = explicitDir || f.Name == "data-dir" })
	if g.databaseURL == "" && !explicitDir {
		tmp, err := os.MkdirTemp("", "payintake-bench-")
		if err != nil {
			return fmt.Errorf("bench: create a temp data dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		g.dataDir = tmp
	}
	if *scratch == "" {
		tmp, err := os.MkdirTemp("", "payintake-bench-files-")
		if err != nil {
			return fmt.Errorf("bench: create a scratch folder: %w", err)
		}
		defer os.RemoveAll(tmp)
		*scratch = tmp
	}
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			return fmt.Errorf("bench: create profile folder: %w", err)
		}
	}
	e, err := g.open(ctx, g.logger(stderr), 4)
	if err != nil {
		return err
	}
	defer e.close()
	url := g.databaseURL
	where := "--database-url"
	if e.server != nil {
		url, where = e.server.URL(), "embedded, "+g.dataDir
	}
	// The server reports its version when a connection starts: no query.
	conn, err := e.store.Pool().Acquire(ctx)
	if err != nil {
		return fmt.Errorf("bench: read the server version: %w", err)
	}
	pgVersion := conn.Conn().PgConn().ParameterStatus("server_version")
	conn.Release()
	fmt.Fprintf(stdout, "machine: %s\n", machine())
	fmt.Fprintf(stdout, "database: PostgreSQL %s (%s)\n", pgVersion, where)
	runID := strconv.FormatInt(time.Now().Unix(), 36)

	var results []bench.Result
	for _, n := range rows {
		p := fmt.Sprintf("bench-%s-%d", runID, n)
		runs := 0
		if n <= 10000 {
			runs = *latencyRuns
		}
		fmt.Fprintf(stderr, "bench: %d rows...\n", n)
		var r bench.Result
		opt := bench.Options{Rows: n, Partner: p, Dir: *scratch, LatencyRuns: runs, Workbooks: *workbooks, XLSXFirst: *xlsxFirst}
		if *inProcess {
			r, err = benchSize(ctx, e.intake, opt, *profDir, stderr)
		} else {
			r, err = benchSubprocess(ctx, g, url, opt, *profDir, stderr)
		}
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	printBench(stdout, results)
	return nil
}

func benchChild(ctx context.Context, g *globals, opt bench.Options, profDir string, stdout, stderr io.Writer) error {
	e, err := g.open(ctx, g.logger(stderr), 4)
	if err != nil {
		return err
	}
	defer e.close()
	r, err := benchSize(ctx, e.intake, opt, profDir, stderr)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(r)
}

// benchSize runs one size (opt.Rows) in this process.
func benchSize(ctx context.Context, in *intake.Intake, opt bench.Options, profDir string, stderr io.Writer) (bench.Result, error) {
	n := opt.Rows
	if profDir != "" {
		f, err := os.Create(filepath.Join(profDir, fmt.Sprintf("cpu-%d.pprof", n)))
		if err != nil {
			return bench.Result{}, fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return bench.Result{}, fmt.Errorf("bench: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	opt.Progress = func(step string) { fmt.Fprintf(stderr, "bench:   %d rows: %s\n", n, step) }
	return bench.Run(ctx, in, opt)
}

// benchSubprocess runs one size in a fresh process of this binary, so each
// size's peak memory is measured alone.
func benchSubprocess(ctx context.Context, g *globals, url string, opt bench.Options, profDir string, stderr io.Writer) (bench.Result, error) {
	n := opt.Rows
	var r bench.Result
	exe, err := os.Executable()
	if err != nil {
		return r, fmt.Errorf("bench: find this program: %w", err)
	}
	args := []string{"bench", "--child", "--rows", strconv.Itoa(n), "--partner", opt.Partner, "--scratch", opt.Dir,
		"--database-url", url, "--latency-runs", strconv.Itoa(opt.LatencyRuns),
		"--workbooks=" + strconv.FormatBool(opt.Workbooks), "--xlsx-first=" + strconv.FormatBool(opt.XLSXFirst)}
	if profDir != "" {
		args = append(args, "--cpuprofile", profDir)
	}
	if g.verbose {
		args = append(args, "--verbose")
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("bench: the run with %d rows failed (%v); see its messages above", n, err)
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("bench: read the result of the run with %d rows: %w", n, err)
	}
	return r, nil
}

func printBench(w io.Writer, results []bench.Result) {
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }
	rate := func(n int, d time.Duration) string { return fmt.Sprintf("%.0f", float64(n)/d.Seconds()) }
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| rows | file MB | baseline s (copy + upsert) | first submission s | ratio | rows/s | baseline rows/s | unchanged resubmission s | 1% changed s | peak RSS MB |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		fmt.Fprintf(w, "| %d | %.1f | %s (%s + %s) | %s | %.2f× | %s | %s | %s | %s | %.0f |\n",
			r.Rows, float64(r.FileBytes)/1e6, sec(r.Baseline), sec(r.BaselineCopy), sec(r.BaselineUpsert),
			sec(r.First.Duration), r.First.Duration.Seconds()/r.Baseline.Seconds(),
			rate(r.Rows, r.First.Duration), rate(r.Rows, r.Baseline),
			sec(r.Unchanged.Duration), sec(r.Changed1.Duration), float64(r.PeakRSS)/(1<<20))
	}
	printWorkbooks(w, results)
	for _, r := range results {
		if len(r.Latencies) == 0 {
			continue
		}
		var all []string
		for _, l := range r.Latencies {
			all = append(all, fmt.Sprintf("%.0f", float64(l.Duration.Microseconds())/1000))
		}
		fmt.Fprintf(w, "\n%d-row file, upload closed → result file written: median %.0f ms over %d new files (ms: %s)\n",
			r.Rows, float64(r.LatencyMedian().Microseconds())/1000, len(r.Latencies), strings.Join(all, ", "))
	}
}

// printWorkbooks prints the workbook figures of the sizes that have them:
// the same payroll as CSV and as .xlsx, each a first file, and a first
// file whose result is a workbook, each with its own peak RSS.
func printWorkbooks(w io.Writer, results []bench.Result) {
	header := false
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	for _, r := range results {
		x := r.Workbook
		if x == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "Elapsed s (payintake's CPU s, peak RSS MB) of each step:")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| rows | CSV MB | .xlsx MB | CSV first | .xlsx first | .xlsx / CSV elapsed (CPU) | results: xlsx first | result workbook MB | built alone |")
			fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
			header = true
		}
		step := func(d, cpu time.Duration, rss int64) string {
			return fmt.Sprintf("%.2f (%.2f, %.0f)", d.Seconds(), cpu.Seconds(), mb(rss))
		}
		fmt.Fprintf(w, "| %d | %.1f | %.1f | %s | %s | %.2f× (%.2f×) | %s | %.1f | %s |\n",
			r.Rows, float64(x.CSVBytes)/1e6, float64(x.XLSXBytes)/1e6,
			step(x.CSV.Duration, x.CSV.CPU, x.CSV.PeakRSS), step(x.XLSX.Duration, x.XLSX.CPU, x.XLSX.PeakRSS),
			x.XLSX.Duration.Seconds()/x.CSV.Duration.Seconds(), x.XLSX.CPU.Seconds()/x.CSV.CPU.Seconds(),
			step(x.ResultXLSX.Duration, x.ResultXLSX.CPU, x.ResultXLSX.PeakRSS),
			float64(x.ResultBytes)/1e6, step(x.Build, x.BuildCPU, x.BuildRSS))
	}
}

// machine describes this computer: CPUs, CPU model, memory.
func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					mem = fmt.Sprintf(", %.1f GiB RAM", float64(kb)/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
