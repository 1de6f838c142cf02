package records_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// The partner id rule in Go and the partners table's CHECK agree.
func TestPartnerIDRuleParity(t *testing.T) {
	st := pgtest.Store(t)
	ctx := t.Context()
	for _, id := range []string{"acme", "a", "0x", "acme-co.uk_2", strings.Repeat("a", 63), strings.Repeat("a", 64),
		"", "Acme", "-acme", ".acme", "_a", "ac me", "acme\n", "acmé", "a/b", "a\\b", "a;b"} {
		var inTable bool
		err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO partners (id) VALUES ($1)`, id)
			if err == nil {
				inTable = true
				return errors.New("roll back")
			}
			return err
		})
		var pgErr *pgconn.PgError
		if !inTable && !(errors.As(err, &pgErr) && pgErr.Code == pgerrcode.CheckViolation) {
			t.Fatalf("insert %q: %v", id, err)
		}
		if got := records.ValidPartnerID(id); got != inTable {
			t.Errorf("%q: Go says %v, the table says %v", id, got, inTable)
		}
	}
}

// Setting a received file's time never waits for, or disturbs, the row lock
// that processing holds on its envelope as a lease.
func TestSetInboxModTimeBesideTheProcessingLease(t *testing.T) {
	st := pgtest.Store(t)
	ctx := t.Context()
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f.csv")
	if err := os.WriteFile(path, []byte("employee_ref\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := st.Receive(ctx, records.Incoming{PartnerID: "acme", FileName: "f.csv", Source: "sftp", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT id FROM envelopes WHERE id = $1 FOR NO KEY UPDATE`, env.ID); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.SetInboxModTime(short, "acme", "f.csv", time.Now().Add(-time.Hour), mtime); err != nil {
		t.Fatalf("set time while processing holds the envelope: %v", err)
	}
	f, err := st.InboxFile(ctx, "acme", "f.csv", time.Now().Add(-time.Hour))
	if err != nil || !f.ModTime.Equal(mtime) || f.Size != int64(len("employee_ref\n")) {
		t.Fatalf("inbox file: %+v %v", f, err)
	}
	if err := st.SetInboxModTime(ctx, "acme", "other.csv", time.Now().Add(-time.Hour), mtime); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("time of a file never received: %v", err)
	}
}
