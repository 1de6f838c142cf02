package httpapi

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/payintake/payintake/intake"
)

// The same key and body under another ?name= is refused, saying which
// parameter differs, rather than replayed under the first name.
func TestSubmitSameKeyOtherName(t *testing.T) {
	e := newEnv(t, Config{})
	first := e.submit("acme", "run-1", "march.csv", firstRun)
	wantStatus(t, first, http.StatusCreated)
	envelopes := e.count(`SELECT count(*) FROM envelopes`)

	p := wantProblem(t, e.submit("acme", "run-1", "april.csv", firstRun), http.StatusUnprocessableEntity, "idempotency_key_parameter_mismatch")
	detail, _ := p["detail"].(string)
	if p["field"] != "name" || !strings.Contains(detail, `name="march.csv"`) || !strings.Contains(detail, `name="april.csv"`) {
		t.Fatalf("problem %v does not say that name differs and how", p)
	}
	if n := e.count(`SELECT count(*) FROM envelopes`); n != envelopes {
		t.Fatalf("%d envelopes after the refused repeat, want %d", n, envelopes)
	}
	again := e.submit("acme", "run-1", "march.csv", firstRun)
	if again.status != http.StatusCreated || !again.replayed() || !bytes.Equal(again.body, first.body) {
		t.Fatalf("the repeat under the first name: %d %s, want the first answer replayed", again.status, again.body)
	}
}

// The same rule when the key was first used by another door (a file whose
// name is the key).
func TestSubmitUploadedKeyOtherName(t *testing.T) {
	e := newEnv(t, Config{})
	path := filepath.Join(t.TempDir(), "a.csv")
	writeFile(t, path, firstRun)
	if _, _, err := intake.New(e.st, nil).IngestFile(e.ctx, "acme", path, "sftp"); err != nil {
		t.Fatal(err)
	}
	p := wantProblem(t, e.submit("acme", "a.csv", "b.csv", firstRun), http.StatusUnprocessableEntity, "idempotency_key_parameter_mismatch")
	if p["field"] != "name" {
		t.Fatalf("problem %v", p)
	}
	if n := e.count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("the refused request left its key leased (%d keys)", n)
	}
	if got := e.record("acme", "E001", "2026-03", "BASE"); got.Version != 1 {
		t.Fatalf("record applied twice: %+v", got)
	}
}
