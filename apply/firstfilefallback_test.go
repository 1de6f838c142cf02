package apply_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/apply/applytest"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// TestFirstFileReadFailureIsStagedAndLogged fails the second read of a
// first file read without staging (firstfile.go) with an error that is no
// reason of the file's own (a read error): the records copied so far and
// the employees onboarded are rolled back, the file is staged from a new
// read and every row created once, and the failure is logged for the
// operator (without tracing, nothing else shows it).
func TestFirstFileReadFailureIsStagedAndLogged(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	st, err := records.Open(ctx, pgtest.New(t), records.Options{SecretKeys: pgtest.TestSecretKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.AddPartner(ctx, records.Partner{ID: "acme", Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pay-1.csv")
	if err := os.WriteFile(path, []byte("a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := st.Receive(ctx, records.Incoming{PartnerID: "acme", FileName: "pay-1.csv", Source: "cli", Path: path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rows []records.StagedRow
	for i, ref := range []string{"E1", "E2", "E3", "E4"} {
		r := applytest.Row(ref, "10.00")
		r.Row, r.Line = i+1, i+2
		rows = append(rows, r)
	}
	var reads []bool // KeysOnly of each Reread
	failed := errors.New("the disk went away")
	job, err := apply.New(st, apply.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Open(ctx, env.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close(ctx)
	env, err = job.Apply(ctx, apply.Plan{Rows: applytest.Rows(rows), Reread: func(o apply.ReadOptions) (apply.RowSource, error) {
		reads = append(reads, o.KeysOnly)
		if len(reads) == 3 {
			return &failingRows{rows: rows[:2], err: failed}, nil
		}
		return applytest.Rows(rows), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reads) != 4 || !reads[0] || !reads[1] || reads[2] || reads[3] {
		t.Errorf("reads (keysOnly each): %v; want the first row's, a first pass, a second that fails, and the staged read", reads)
	}
	if env.Status != records.StatusProcessed || env.Counts["created"] != len(rows) || len(env.Counts) != 1 {
		t.Errorf("envelope %s %v; want processed, %d created", env.Status, env.Counts, len(rows))
	}
	for _, r := range rows {
		if got, err := st.FindRecord(ctx, "acme", r.EmployeeRef, applytest.Period, "BASE"); err != nil || got.Amount != "10.00" || got.Version != 1 {
			t.Errorf("record of %s: %+v, %v", r.EmployeeRef, got, err)
		}
	}
	if !strings.Contains(logs.String(), "could not be read without staging") || !strings.Contains(logs.String(), failed.Error()) {
		t.Errorf("no warning in the log that the first file could not be read without staging:\n%s", logs.String())
	}
}

// failingRows gives rows, then err.
type failingRows struct {
	rows []records.StagedRow
	err  error
}

func (s *failingRows) Next() (records.StagedRow, error) {
	if len(s.rows) == 0 {
		return records.StagedRow{}, s.err
	}
	r := s.rows[0]
	s.rows = s.rows[1:]
	return r, nil
}
