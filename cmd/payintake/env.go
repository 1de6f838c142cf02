package main

import (
	"net"
	"time"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/trace"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/fault"
	"github.com/payintake/payintake/internal/observe"
	"github.com/payintake/payintake/pgserver"
	"github.com/payintake/payintake/records"
)

// globals are the flags every command takes.
type globals struct {
	dataDir     string
	databaseURL string
	verbose     bool
	log         logFlags
	// stderr is where the install script (installMissing) speaks.
	stderr io.Writer
	// needs are the install script's profiles this run needs besides the
	// PostgreSQL server binaries (serve --demo: "demo").
	needs []string
}

func newFlagSet(name string, stderr io.Writer) (*flag.FlagSet, *globals) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package's own messages and usage dump are silenced: parse
	// turns its errors into one sentence, and -h prints the flags (run).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	g := &globals{stderr: stderr}
	fs.StringVar(&g.dataDir, "data-dir", envOr("PAYINTAKE_DATA_DIR", "./payintake-data"), "the embedded database, secret.key, spool files")
	fs.StringVar(&g.databaseURL, "database-url", os.Getenv("PAYINTAKE_DATABASE_URL"), "an external PostgreSQL; empty means the embedded one")
	fs.BoolVar(&g.verbose, "verbose", false, "log progress to stderr")
	g.log.register(fs)
	return fs, g
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// helpError asks run to print a command's flags (-h) and exit 0.
type helpError struct{ fs *flag.FlagSet }

func (helpError) Error() string { return "help requested" }

// parse parses flags that may come before, between or after positional
// arguments ("partner add ID --name X") and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpError{fs}
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// env is what a command runs with: the store, and the embedded server if
// this process uses one.
type env struct {
	g      *globals
	log    *slog.Logger
	server *pgserver.Server
	store  *records.Store
	intake *intake.Intake
	// tracing is OpenTelemetry's tracer provider: a no-op one unless the
	// OTEL_EXPORTER_OTLP_* environment turns tracing on.
	tracing     trace.TracerProvider
	stopTracing func(context.Context) error
}

// logger is a command's logger: silent unless --verbose (serve always
// logs, through alwaysLogger).
func (g *globals) logger(stderr io.Writer) *slog.Logger {
	if !g.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return g.alwaysLogger(stderr)
}

// alwaysLogger writes to stderr in --log-format from --log-level on.
func (g *globals) alwaysLogger(stderr io.Writer) *slog.Logger {
	return slog.New(g.log.handler(stderr))
}

// open connects to the database (starting the embedded one if needed) and
// applies migrations.
func (g *globals) open(ctx context.Context, log *slog.Logger, maxConns int32) (*env, error) {
	e := &env{g: g, log: log}
	tp, stopTracing, err := observe.NewTracerProvider(ctx)
	if err != nil {
		return nil, err
	}
	e.tracing, e.stopTracing = tp, stopTracing
	url := g.databaseURL
	if err := g.installMissing(ctx, url == ""); err != nil {
		return nil, err
	}
	if url == "" {
		dir, err := filepath.Abs(g.dataDir)
		if err != nil {
			return nil, fmt.Errorf("data dir %q: %w", g.dataDir, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		srv, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("start the embedded database: %w", err)
		}
		e.server = srv
		url = srv.URL()
	}
	if g.databaseURL != "" {
		if err := reachable(ctx, url); err != nil {
			return nil, err
		}
	}
	if err := records.Migrate(ctx, url); err != nil {
		e.close()
		return nil, err
	}
	// secret.key is created on first use, unless the database already holds
	// secrets sealed under a key this process would then not have.
	var sealedExist bool
	opts := records.Options{MaxConns: maxConns, Logger: log, TracerProvider: e.tracing,
		SecretKeys: g.secretKeyLoader(func() bool { return !sealedExist }), Sealer: intake.SealerOf}
	if fault.Enabled() { // crash tests only: PAYINTAKE_FAULT
		opts.QueryTracer = fault.Tracer{}
	}
	st, err := records.Open(ctx, url, opts)
	if err != nil {
		e.close()
		return nil, err
	}
	e.store = st
	if sealedExist, err = st.HasSealedSecrets(ctx); err != nil {
		e.close()
		return nil, err
	}
	// The job queue's own tables (River) are migrations too: every command
	// applies them, so `migrate` leaves nothing for `serve` to do.
	if err := intake.MigrateQueue(ctx, st.Pool()); err != nil {
		e.close()
		return nil, err
	}
	e.intake = intake.New(st, log)
	return e, nil
}

func (e *env) close() {
	if e.stopTracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := e.stopTracing(ctx); err != nil {
			e.log.Warn("flush the last trace spans", "err", err)
		}
		cancel()
	}
	if e.store != nil {
		e.store.Close()
	}
	if e.server != nil {
		if err := e.server.Stop(context.Background()); err != nil {
			e.log.Error("stop the embedded database", "err", err)
		}
	}
}

// needPartner checks that partner exists, and says how to add it when it
// does not; any other error (the database) is returned as it is.
func (e *env) needPartner(ctx context.Context, id string) error {
	_, err := e.store.Partner(ctx, id)
	return partnerErr(id, err)
}

// partnerErr says how to add partner id when err is its ErrNotFound.
func partnerErr(id string, err error) error {
	if errors.Is(err, records.ErrNotFound) {
		return fmt.Errorf("unknown partner %q: add it with `payintake partner add %s`", id, id)
	}
	return err
}

// oneLine makes an error message one sentence on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// reachable checks that the external database answers, and says so in one
// sentence when it does not (the driver's error repeats itself per address).
func reachable(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("--database-url is not a PostgreSQL connection string: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		var cause any = err
		var op *net.OpError
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr):
			cause = pgErr.Message
		case errors.As(err, &op):
			cause = op.Err
		}
		return fmt.Errorf("cannot connect to the database of --database-url (host %s, port %d, database %s): %v; check the URL and that PostgreSQL is running",
			cfg.Host, cfg.Port, cfg.Database, cause)
	}
	return conn.Close(ctx)
}
