package migrations_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/payintake/payintake/migrations"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// TestReplayAnswersGetTheirFormat: migration 00220 gives every replay
// answered before it (code and bytes only) the format they were all sent
// with, JSON, and leaves no default: a new replay states its answer's
// format (records.StoredAnswer), the store never chooses one.
func TestReplayAnswersGetTheirFormat(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.csv")
	if err := os.WriteFile(path, []byte("employee_ref,pay_period,component,amount,currency\nE1,2026-11,BASE,1.00,USD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := st.Receive(ctx, records.Incoming{PartnerID: "acme", FileName: "a.csv", Source: "test", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(st.Pool()), migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 219); err != nil {
		t.Fatal(err)
	}
	const body = `{"id":1}` + "\n"
	if _, err := st.Pool().Exec(ctx, `INSERT INTO replays (partner_id, of_envelope, idem_key, source, body_sha256, body,
		counts, result, response_status, response_body) VALUES ('acme', $1, 'k', 'http', $2, '{}', '{}', '', 201, $3)`,
		env.ID, make([]byte, 32), []byte(body)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	var code int
	var format, got string
	if err := st.Pool().QueryRow(ctx, `SELECT response_status, response_type, convert_from(response_body, 'UTF8') FROM replays`).
		Scan(&code, &format, &got); err != nil {
		t.Fatal(err)
	}
	if code != 201 || format != "application/json" || got != body {
		t.Fatalf("replay answer after 00220: %d %q %q, want 201 application/json %q", code, format, got, body)
	}
	_, err = st.Pool().Exec(ctx, `INSERT INTO replays (partner_id, of_envelope, idem_key, source, body_sha256, body,
		counts, result, response_status, response_body) VALUES ('acme', $1, 'k2', 'http', $2, '{}', '{}', '', 201, '')`,
		env.ID, make([]byte, 32))
	if err == nil {
		t.Fatal("a replay without a format was accepted: the column has a default")
	}
}
