package apply_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// TestProcessSettings runs the processing transaction's settings statement
// on a fresh session, on one whose temporary buffers already exist at
// PostgreSQL's default size (where SET temp_buffers is refused), and twice
// on one session, as a pooled connection processes file after file.
func TestProcessSettings(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	settings := func(t *testing.T, conn *pgx.Conn) (workMem, jit, tempBuffers string) {
		t.Helper()
		err := conn.QueryRow(ctx, `SELECT current_setting('work_mem'), current_setting('jit'), current_setting('temp_buffers')`).
			Scan(&workMem, &jit, &tempBuffers)
		if err != nil {
			t.Fatal(err)
		}
		return workMem, jit, tempBuffers
	}
	connect := func(t *testing.T) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	// process runs the settings in a transaction that then uses a temporary
	// table, as a staged file does, and returns the settings it saw.
	process := func(t *testing.T, conn *pgx.Conn) (workMem, jit, tempBuffers string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, apply.ProcessSettingsSQL); err != nil {
			t.Fatalf("settings: %v", err)
		}
		workMem, jit, tempBuffers = settings(t, conn)
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE staged (n int) ON COMMIT DROP; INSERT INTO staged VALUES (1)`); err != nil {
			t.Fatalf("the transaction after the settings: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return workMem, jit, tempBuffers
	}
	defaults := func(t *testing.T, conn *pgx.Conn) {
		t.Helper()
		if w, j, b := settings(t, conn); w != "4MB" || j != "on" || b != "8MB" {
			t.Errorf("after the transaction: work_mem %s, jit %s, temp_buffers %s; want the defaults 4MB, on, 8MB", w, j, b)
		}
	}

	t.Run("fresh session", func(t *testing.T) {
		conn := connect(t)
		if w, j, b := process(t, conn); w != "64MB" || j != "off" || b != "256MB" {
			t.Errorf("work_mem %s, jit %s, temp_buffers %s; want 64MB, off, 256MB", w, j, b)
		}
		defaults(t, conn)
		// The same session again: its local buffers are 256MB now.
		if w, j, _ := process(t, conn); w != "64MB" || j != "off" {
			t.Errorf("second transaction: work_mem %s, jit %s; want 64MB, off", w, j)
		}
	})
	t.Run("temporary tables used before", func(t *testing.T) {
		conn := connect(t)
		if _, err := conn.Exec(ctx, `CREATE TEMP TABLE earlier (n int); INSERT INTO earlier VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		// PostgreSQL refuses a new temp_buffers now: the statement must not ask.
		if _, err := conn.Exec(ctx, `SET temp_buffers = '256MB'`); err == nil {
			t.Fatal("SET temp_buffers after a temporary table succeeded; the case under test does not arise")
		}
		if w, j, b := process(t, conn); w != "64MB" || j != "off" || b != "8MB" {
			t.Errorf("work_mem %s, jit %s, temp_buffers %s; want 64MB, off and the session's 8MB", w, j, b)
		}
		defaults(t, conn)
	})
}
