package records_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// A door whose client retries one request (RepeatNotRecorded) gets a
// repeat of the first bytes under the key answered without a new
// envelope; anything else under the key is recorded as for every door: a
// repeat without the option, other bytes with the same identity (an
// OpenPGP file encrypted again), a key reuse.
func TestReceiveRepeatNotRecorded(t *testing.T) {
	st := pgtest.Store(t)
	ctx := t.Context()
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first, other := file("first", "employee_ref\nE1\n"), file("other", "employee_ref\nE2\n")
	firstSum := sha256.Sum256([]byte("employee_ref\nE1\n"))
	envelopes := func() int {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM envelopes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	receive := func(path string, identity []byte, notRecorded bool) records.Envelope {
		t.Helper()
		env, err := st.Receive(ctx, records.Incoming{PartnerID: "acme", FileName: "a.csv", Key: "K-1", Source: "http",
			Path: path, Identity: identity, RepeatNotRecorded: notRecorded}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	a := receive(first, nil, true)
	if a.Status != records.StatusReceived || a.ID == 0 || envelopes() != 1 {
		t.Fatalf("first: %+v, %d envelopes", a, envelopes())
	}
	steps := []struct {
		name        string
		path        string
		identity    []byte
		notRecorded bool
		status      string
		recorded    bool
	}{
		{"the same bytes, not recorded", first, nil, true, records.StatusRepeat, false},
		{"the same bytes, recorded", first, nil, false, records.StatusRepeat, true},
		{"other bytes of the same identity", other, firstSum[:], true, records.StatusRepeat, true},
		{"other bytes", other, nil, true, records.StatusKeyReuse, true},
	}
	for _, s := range steps {
		before := envelopes()
		got := receive(s.path, s.identity, s.notRecorded)
		if got.Status != s.status || (got.ID != 0) != s.recorded || (envelopes() == before+1) != s.recorded {
			t.Errorf("%s: %+v, %d envelopes after %d; want %s, recorded %v", s.name, got, envelopes(), before, s.status, s.recorded)
		}
		if s.status == records.StatusRepeat && got.RepeatOf != a.ID {
			t.Errorf("%s: replay of %d, want %d", s.name, got.RepeatOf, a.ID)
		}
	}
}
