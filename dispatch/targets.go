package dispatch

import (
	"context"
	"errors"
	"fmt"
	"github.com/jackc/pgerrcode"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The statements of targets.sql.
var (
	sqlInsertTarget       = query("InsertTarget")
	sqlTargets            = query("Targets")
	sqlTarget             = query("Target")
	sqlDeleteUnusedTarget = query("DeleteUnusedTarget")
	sqlSetTargetURL       = query("SetTargetURL")
)

// Defaults of `target add` (SPEC "Outbound dispatch").
const (
	DefaultRateLimit        = 10
	DefaultChunkSize        = 200
	DefaultChunkNoLineStats = 40
	DefaultMaxAttempts      = 5
	DefaultRetryBase        = 2 * time.Second
	DefaultTimeout          = 10 * time.Second
)

var (
	// ErrExists is returned when a target is added twice.
	ErrExists = errors.New("already exists")
	// ErrNotFound is returned for an unknown target, or a period with no run.
	ErrNotFound = errors.New("not found")
	// ErrBusy is returned when another dispatcher owns the period.
	ErrBusy = errors.New("another dispatcher is sending this period")
)

// Target is a payroll vendor's batch API.
type Target struct {
	Name        string        `json:"name"`
	URL         string        `json:"url"`
	TokenFile   string        `json:"token_file"` // "" means no Authorization header
	RateLimit   float64       `json:"rate_limit"` // requests per second; 0: no limit
	ChunkSize   int           `json:"chunk_size"`
	MaxAttempts int           `json:"max_attempts"`
	RetryBase   time.Duration `json:"-"`
	Timeout     time.Duration `json:"-"`
	LineStatus  bool          `json:"line_status"` // false: --no-line-status
	// Seconds, for JSON readers.
	RetryBaseSeconds float64 `json:"retry_base_seconds"`
	TimeoutSeconds   float64 `json:"timeout_seconds"`
}

// Token reads the bearer token: the first line of TokenFile, or "" if none is set.
func (t Target) Token() (string, error) {
	if t.TokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(t.TokenFile)
	if err != nil {
		return "", fmt.Errorf("token of target %s: %w (the file given to --token-file must be readable by payintake)", t.Name, err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", fmt.Errorf("token file %s of target %s is empty: write the vendor's token on its first line", t.TokenFile, t.Name)
	}
	return tok, nil
}

// Store is dispatch's view of the payintake database.
type Store struct{ pool *pgxpool.Pool }

// NewStore uses the pool of a records.Store (records.Store.Pool()).
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// AddTarget stores a new target. A zero ChunkSize (200, or 40 without line
// status), MaxAttempts or Timeout takes the default; a zero RateLimit means
// no limit and a zero RetryBase no wait, as with `target add`.
func (s *Store) AddTarget(ctx context.Context, t Target) error {
	if t.ChunkSize == 0 {
		t.ChunkSize = DefaultChunkSize
		if !t.LineStatus {
			t.ChunkSize = DefaultChunkNoLineStats
		}
	}
	if t.MaxAttempts == 0 {
		t.MaxAttempts = DefaultMaxAttempts
	}
	if t.Timeout == 0 {
		t.Timeout = DefaultTimeout
	}
	_, err := s.pool.Exec(ctx, sqlInsertTarget,
		t.Name, t.URL, t.TokenFile, t.RateLimit, t.ChunkSize, t.MaxAttempts, t.RetryBase.Milliseconds(),
		t.Timeout.Milliseconds(), t.LineStatus)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgerrcode.UniqueViolation {
		return fmt.Errorf("target %q: %w", t.Name, ErrExists)
	}
	if errors.As(err, &pe) && pe.Code == pgerrcode.CheckViolation {
		return fmt.Errorf("target %q is invalid (%s): the name is lower-case letters, digits, '.', '_' or '-', the URL starts with http:// or https://, the chunk size is 1 to 10000, max attempts 1 to 100", t.Name, pe.ConstraintName)
	}
	if err != nil {
		return fmt.Errorf("add target %q: %w", t.Name, err)
	}
	return nil
}

const targetColumns = `name, url, token_file, rate_limit::float8, chunk_size, max_attempts, retry_base_ms, timeout_ms, line_status`

func scanTarget(row pgx.Row) (Target, error) {
	var t Target
	var base, timeout int64
	err := row.Scan(&t.Name, &t.URL, &t.TokenFile, &t.RateLimit, &t.ChunkSize, &t.MaxAttempts, &base, &timeout, &t.LineStatus)
	t.RetryBase, t.Timeout = time.Duration(base)*time.Millisecond, time.Duration(timeout)*time.Millisecond
	t.RetryBaseSeconds, t.TimeoutSeconds = t.RetryBase.Seconds(), t.Timeout.Seconds()
	return t, err
}

// Targets lists the targets by name.
func (s *Store) Targets(ctx context.Context) ([]Target, error) {
	rows, err := s.pool.Query(ctx, sqlTargets)
	if err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Target, error) { return scanTarget(r) })
	if err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	return ts, nil
}

// Target returns one target, or ErrNotFound.
func (s *Store) Target(ctx context.Context, name string) (Target, error) {
	t, err := scanTarget(s.pool.QueryRow(ctx, sqlTarget, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("target %q: %w (add it with `payintake target add`)", name, ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("read target %q: %w", name, err)
	}
	return t, nil
}

// PutTarget adds a target or, if one of that name exists, replaces its
// settings (serve --demo points its demo target at the address it listens on).
func (s *Store) PutTarget(ctx context.Context, t Target) error {
	if _, err := s.pool.Exec(ctx, sqlDeleteUnusedTarget, t.Name); err != nil {
		return fmt.Errorf("replace target %q: %w", t.Name, err)
	}
	err := s.AddTarget(ctx, t)
	if !errors.Is(err, ErrExists) {
		return err
	}
	if _, err := s.pool.Exec(ctx, sqlSetTargetURL, t.Name, t.URL); err != nil {
		return fmt.Errorf("change the URL of target %q: %w", t.Name, err)
	}
	return nil
}
