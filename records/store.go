// Package records is payintake's PostgreSQL store: partners, envelopes (the
// files as they arrived), records (the current business facts), their history,
// and the exceptions held for reviewers.
//
// Every decision that must hold under concurrency is made by the database:
// submission keys and natural keys are unique constraints, and all writes for
// one partner's records are serialised by a transaction-scoped advisory lock.
package records

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/payintake/payintake/migrations"
)

// Statements of store.sql.
var (
	sqlPartnerLock    = query("PartnerLock")
	sqlPartnerTryLock = query("PartnerTryLock")
)

// ErrNotFound is returned when a partner, envelope or exception does not exist.
var ErrNotFound = errors.New("not found")

// ErrBusy is returned by LockForProcessing when another transaction is
// processing the envelope right now. Wait for it (WaitDone) or try again later.
var ErrBusy = errors.New("envelope is being processed by another worker")

// ErrPartnerBusy is returned by PartnerTryLock when another transaction
// holds the envelope's partner (processing another of its files, a webhook,
// a decision): try again once it is done.
var ErrPartnerBusy = errors.New("another transaction is writing this partner's records")

// Store is a handle on the payintake database. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	spoolDir string
	tracer   trace.Tracer
	keys     *secretKeyring
	sealer   func(ctx context.Context, s *Store, partner string) (*Sealer, error)
	// streams holds a slot per running upload Stream: streams may hold at
	// most a quarter of the pool's connections, so that they never starve
	// processing and the API.
	streams chan struct{}
	// commitTimeout bounds the commit that records an envelope.
	commitTimeout time.Duration
}

// Options tune Open.
type Options struct {
	// MaxConns bounds the connection pool; 0 keeps pgxpool's default.
	MaxConns int32
	Logger   *slog.Logger
	// SpoolDir holds the temporary files of processing: copies of
	// envelopes, and sealed results and result workbooks (with the
	// workbook writer's own temporary file) until they are stored; empty
	// means the system temp dir.
	SpoolDir string
	// CommitTimeout bounds the commit that records an envelope (0:
	// DefaultCommitTimeout); past it Receive fails with ErrCommitUnknown.
	CommitTimeout time.Duration
	// TracerProvider, when set, traces each envelope from its receipt to
	// its result, with the SQL statements as child spans (nil: no tracing).
	TracerProvider trace.TracerProvider
	// SecretKeys loads the keys that seal webhook secrets at rest; it is
	// called again when a sealed secret names a key not loaded (another
	// process rotated them) and before each sealing. Nil: webhook secrets
	// can be neither added nor checked.
	SecretKeys func() (*SecretKeys, error)
	// QueryTracer, when set, observes every statement the store runs (pgx's
	// tracer interface: start and end of each query, COPY, the SQL text),
	// beside the OpenTelemetry spans of TracerProvider. The store does not
	// depend on what it does; serve's crash tests stop the process with one
	// (internal/fault).
	QueryTracer pgx.QueryTracer
	// Sealer, when set, gives the sealer of a partner's files (package
	// intake's: OpenPGP, encrypted to the partner and signed by the
	// platform; nil and no error when it has no keys). The review report of
	// a submission whose results go back sealed is sealed with it in the
	// transaction that writes the report. Nil: review reports stay plain.
	Sealer func(ctx context.Context, s *Store, partner string) (*Sealer, error)
}

// Open connects to the database at url. It does not migrate; call Migrate first.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.Tracer = queryTracer(opts.QueryTracer, opts.TracerProvider)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Store{pool: pool, log: log, spoolDir: opts.SpoolDir, tracer: tp.Tracer(TracerName),
		keys: &secretKeyring{load: opts.SecretKeys}, sealer: opts.Sealer, streams: make(chan struct{}, max(1, cfg.MaxConns/4)),
		commitTimeout: cmp.Or(opts.CommitTimeout, DefaultCommitTimeout)}, nil
}

// Pool gives the underlying connection pool (for the job queue and tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close releases all connections.
func (s *Store) Close() { s.pool.Close() }

// Migrate applies every pending migration in migrations.FS to the database at url.
// It is safe to run from several processes at once: goose takes a session lock.
func Migrate(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	return migrate(ctx, db)
}

func migrate(ctx context.Context, db *sql.DB) error {
	locker, err := newLocker()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// PartnerLock serialises every write to one partner's records. It is held
// until the end of the transaction.
func PartnerLock(ctx context.Context, tx pgx.Tx, partner string) error {
	if _, err := tx.Exec(ctx, sqlPartnerLock, partner); err != nil {
		return fmt.Errorf("lock partner %s: %w", partner, err)
	}
	return nil
}

// PartnerTryLock takes the lock of PartnerLock if it is free, and returns
// ErrPartnerBusy if another transaction holds it.
func PartnerTryLock(ctx context.Context, tx pgx.Tx, partner string) error {
	var got bool
	if err := tx.QueryRow(ctx, sqlPartnerTryLock, partner).Scan(&got); err != nil {
		return fmt.Errorf("lock partner %s: %w", partner, err)
	}
	if !got {
		return ErrPartnerBusy
	}
	return nil
}

func newLocker() (lock.SessionLocker, error) {
	l, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	return l, nil
}
