package sftpd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/internal/eventually"
	"github.com/payintake/payintake/pgserver"
	"github.com/payintake/payintake/records"
)

// A database that takes connections and reads but cannot commit (a primary
// whose synchronous standby is gone) answers an upload's close with "not
// confirmed, send it again" within seconds, and a commit check fails; once
// it commits again, the resent file is recognised (one envelope applied).
// synchronous_standby_names is a server setting: the test runs its own
// cluster, not the one the other tests share.
func TestSFTPCloseWhenTheDatabaseCannotCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := os.Getenv("PAYINTAKE_TEST_DATA_DIR")
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "sync-standby-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pg, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pg.Stop(ctx); err != nil {
			t.Errorf("stop the test's own cluster: %v", err)
		}
		os.RemoveAll(dir)
	})
	url := pg.URL()
	if err := records.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	const commitTimeout = 2 * time.Second
	z := newDropZone(t, zoneOpts{url: url, workers: -1, commit: commitTimeout})
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	standby := func(name string) {
		t.Helper()
		q := `ALTER SYSTEM RESET synchronous_standby_names`
		if name != "" {
			q = `ALTER SYSTEM SET synchronous_standby_names = '` + name + `'`
		}
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
			t.Fatal(err)
		}
		// Commits wait for a standby once the checkpointer has reloaded the
		// setting (it tells the backends): the store's commit check says
		// when.
		eventually.NoError(t, 10*time.Second, func() error {
			check, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			err := z.store.CanCommit(check)
			cancel()
			if (err == nil) != (name == "") {
				return fmt.Errorf("synchronous_standby_names = %q: commit check %v", name, err)
			}
			return nil
		})
	}
	// Registered after the zone: runs before its cleanup, so that the
	// zone's last commits can end.
	t.Cleanup(func() { standby("") })

	key := z.partner("acme")
	c := z.login("acme", key)
	data := []byte(payroll)
	// The upload is open and written while the database commits; its
	// close comes once it cannot.
	f, err := c.Create("/inbox/stuck.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := z.store.CanCommit(ctx); err != nil {
		t.Fatalf("commit check before the standby is required: %v", err)
	}
	// standby waits until the commit check fails (and fails the test if it
	// never does).
	standby("standby_that_does_not_exist")
	t0 := time.Now()
	err = f.Close()
	took := time.Since(t0)
	if err == nil || !strings.Contains(err.Error(), "did not confirm the upload of stuck.csv in time") || !strings.Contains(err.Error(), "send it again") {
		t.Fatalf("close while the database cannot commit: %v", err)
	}
	if took > commitTimeout+5*time.Second {
		t.Fatalf("the close was answered after %s (commit timeout %s)", took, commitTimeout)
	}
	t.Logf("close answered in %s: %v", took, err)

	standby("")
	put(t, c, "/inbox/stuck.csv", data)
	// The first commit happened locally when its wait was cancelled (or
	// not): either way the file is applied once.
	if n := z.count(`SELECT count(*) FROM envelopes WHERE file_name = 'stuck.csv' AND status NOT IN ('replay', 'incomplete')`); n != 1 {
		t.Fatalf("%d envelopes of stuck.csv to apply, want 1", n)
	}
}
