package migrations_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/payintake/payintake/pgserver"
	"github.com/payintake/payintake/pgserver/pgtest"
)

var updateSchema = flag.Bool("update-schema", false, "write schema.sql from a freshly migrated database")

// TestSchemaFile: schema.sql is today's schema as pg_dump states it for a
// database every migration has run on — tables, indexes, functions and
// triggers in one file a reader can open — so a change to the schema shows
// as a diff of schema.sql in review. After adding a migration, run
//
//	go test ./migrations -run TestSchemaFile -update-schema
//
// and commit schema.sql with it.
func TestSchemaFile(t *testing.T) {
	got := dumpSchema(t, pgtest.New(t))
	if *updateSchema {
		if err := os.WriteFile("schema.sql", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatalf("%v: create it with go test ./migrations -run TestSchemaFile -update-schema", err)
	}
	if !bytes.Equal(got, want) {
		gotPath := filepath.Join(t.TempDir(), "schema.sql")
		_ = os.WriteFile(gotPath, got, 0o644)
		diff, _ := exec.Command("diff", "-u", "schema.sql", gotPath).CombinedOutput()
		t.Fatalf("schema.sql is not the migrated schema; if the change is meant, run go test ./migrations -run TestSchemaFile -update-schema\n%s", diff)
	}
}

// dumpNoise is the lines that say nothing of the schema, or change from run to run:
// pg_dump's version banner, its session settings, and the random key of
// its \restrict guard.
var dumpNoise = regexp.MustCompile(`(?m)^(-- Dumped (from|by) .*|SET .*|SELECT pg_catalog\.set_config.*|\\(un)?restrict .*)\n`)

// dumpSchema runs pg_dump --schema-only on the database at url (a
// key=value connection string).
func dumpSchema(t *testing.T, url string) []byte {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := pgserver.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), filepath.Join(bin, "pg_dump"), "--schema-only", "--no-owner", "--no-privileges",
		"-d", cfg.Database)
	cmd.Env = append(os.Environ(), "PGHOST="+cfg.Host, "PGPORT="+strconv.Itoa(int(cfg.Port)), "PGUSER="+cfg.User, "PGPASSWORD="+cfg.Password)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, stderr.String())
	}
	out = dumpNoise.ReplaceAll(out, nil)
	// Runs of blank lines left where the noise was are folded.
	s := regexp.MustCompile(`\n{3,}`).ReplaceAllString(string(out), "\n\n")
	return []byte(strings.TrimLeft(s, "\n"))
}
