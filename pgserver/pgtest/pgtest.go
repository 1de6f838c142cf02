// Package pgtest gives tests a real, freshly migrated PostgreSQL database.
//
// A package's TestMain calls Main, which starts (or joins) one embedded
// cluster shared by every test process of the run, in
// $PAYINTAKE_TEST_DATA_DIR (default: a payintake-test folder in the system
// temp dir). The last process to finish stops it. Each call to New creates a
// new database from a migrated template, so tests never see each other's
// rows and run in parallel.
//
// With PAYINTAKE_TEST_DATABASE_URL set (an external PostgreSQL whose user may
// create databases), that server is used instead. There is no skipping: if
// no database can be had, the tests fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/jackc/pgerrcode"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/migrations"
	"github.com/payintake/payintake/pgserver"
	"github.com/payintake/payintake/records"
)

// cluster is the test process's connection to the shared server. It is set
// once by Main before any test runs.
var cluster struct {
	once     sync.Once
	err      error
	server   *pgserver.Server
	admin    string // URL of a database to run CREATE DATABASE from
	urlFor   func(string) string
	template string
}

// Main runs the tests of a package against the shared cluster and returns the
// exit code: use it as os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if cluster.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cluster.server.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop cluster:", err)
		}
	}
	return code
}

func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if url := os.Getenv("PAYINTAKE_TEST_DATABASE_URL"); url != "" {
		cfg, err := pgconn.ParseConfig(url)
		if err != nil {
			return fmt.Errorf("PAYINTAKE_TEST_DATABASE_URL: %w", err)
		}
		cluster.admin = url
		cluster.urlFor = func(db string) string {
			c := *cfg
			return fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=disable", c.Host, c.Port, c.User, c.Password, db)
		}
	} else {
		dir := os.Getenv("PAYINTAKE_TEST_DATA_DIR")
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "payintake-test")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		srv, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir})
		if err != nil {
			return fmt.Errorf("start the test PostgreSQL: %w", err)
		}
		cluster.server = srv
		cluster.admin = srv.URL()
		cluster.urlFor = srv.URLFor
	}
	name, err := templateName()
	if err != nil {
		return err
	}
	cluster.template = name
	return ensureTemplate(ctx, name)
}

// templateName is named by a hash of the migrations, so a changed schema
// gets a new template.
func templateName() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, p)
		h.Write([]byte(p))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	return "payintake_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

func ensureTemplate(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, cluster.admin)
	if err != nil {
		return fmt.Errorf("connect to the test PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	// One process builds the template; the others wait on the lock.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(7311)`); err != nil {
		return err
	}
	defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock(7311)`)
	var ready bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)`, name).Scan(&ready); err != nil {
		return err
	}
	if ready {
		return nil
	}
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return err
	}
	if err := records.Migrate(ctx, cluster.urlFor(name)); err != nil {
		return fmt.Errorf("migrate the test template: %w", err)
	}
	_, err = conn.Exec(ctx, `ALTER DATABASE `+name+` WITH IS_TEMPLATE true`)
	return err
}

// New creates a fresh migrated database for the test and returns its URL.
// The database is dropped when the test ends.
func New(t testing.TB) string {
	t.Helper()
	cluster.once.Do(func() { cluster.err = setup() })
	if cluster.err != nil {
		t.Fatalf("pgtest: %v", cluster.err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + strings.ToLower(hex.EncodeToString(b[:]))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cluster.admin)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	for i := 0; ; i++ {
		_, err = conn.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE `+cluster.template)
		var pgErr *pgconn.PgError
		// Another backend may briefly hold the template (a concurrent CREATE DATABASE).
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ObjectInUse && i < 50 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, cluster.admin)
		if err != nil {
			t.Errorf("pgtest: drop database: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return cluster.urlFor(name)
}

// Store opens a records.Store on a fresh database, closed when the test ends.
func Store(t testing.TB) *records.Store {
	t.Helper()
	st, err := records.Open(context.Background(), New(t), records.Options{SecretKeys: TestSecretKeys})
	if err != nil {
		t.Fatalf("pgtest: open store: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

// TestSecretKeys are the keys a test store seals webhook secrets with: one
// fixed key, derived from a label (test databases hold no real secrets).
func TestSecretKeys() (*records.SecretKeys, error) {
	k := sha256.Sum256([]byte("pgtest secret key"))
	return records.NewSecretKeys(k[:])
}

// Count runs a query that returns one number, such as SELECT count(*), on
// st and returns it; the test fails if the query does.
func Count(ctx context.Context, t testing.TB, st *records.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := st.Pool().QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
