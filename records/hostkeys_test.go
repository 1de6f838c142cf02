package records_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func hostKey(typ, fp string, state records.HostKeyState) records.HostKey {
	return records.HostKey{Type: typ, Fingerprint: "SHA256:" + fp, PublicKey: []byte("pub " + fp),
		Private: []byte("private " + fp), Origin: "test", State: state}
}

func hostKeyStates(t *testing.T, st *records.Store) map[string]records.HostKeyState {
	t.Helper()
	keys, err := st.HostKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]records.HostKeyState{}
	for _, k := range keys {
		if string(k.Private) != "private "+k.Fingerprint[len("SHA256:"):] {
			t.Fatalf("key %s opens to %q", k.Fingerprint, k.Private)
		}
		m[k.Fingerprint] = k.State
	}
	return m
}

// One key of a type per live state; promotion and activation retire the
// key they replace in the same transaction; a sealed key copied onto
// another row does not open.
func TestHostKeyStates(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	add := func(k records.HostKey) bool {
		t.Helper()
		added, err := st.AddHostKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return added
	}
	if !add(hostKey("ssh-ed25519", "a", records.HostKeyActive)) || add(hostKey("ssh-ed25519", "b", records.HostKeyActive)) {
		t.Fatal("a second active Ed25519 key was added")
	}
	if add(hostKey("ssh-ed25519", "a", records.HostKeyNext)) {
		t.Fatal("the same key was added twice")
	}
	if !add(hostKey("ecdsa-sha2-nistp256", "c", records.HostKeyActive)) || !add(hostKey("ssh-ed25519", "d", records.HostKeyNext)) ||
		add(hostKey("ssh-ed25519", "e", records.HostKeyNext)) {
		t.Fatal("one next key per type")
	}
	if _, err := st.AddHostKey(ctx, hostKey("ssh-ed25519", "f", records.HostKeyRetired)); err == nil {
		t.Fatal("a key added as retired")
	}
	want := map[string]records.HostKeyState{"SHA256:a": records.HostKeyActive, "SHA256:c": records.HostKeyActive, "SHA256:d": records.HostKeyNext}
	if got := hostKeyStates(t, st); !maps.Equal(got, want) {
		t.Fatalf("states %v, want %v", got, want)
	}

	promoted, err := st.PromoteHostKeys(ctx)
	if err != nil || !slices.Equal(promoted, []string{"SHA256:d"}) {
		t.Fatalf("promote: %v %v", promoted, err)
	}
	want = map[string]records.HostKeyState{"SHA256:a": records.HostKeyRetired, "SHA256:c": records.HostKeyActive, "SHA256:d": records.HostKeyActive}
	if got := hostKeyStates(t, st); !maps.Equal(got, want) {
		t.Fatalf("after promote %v, want %v", got, want)
	}
	if _, err := st.PromoteHostKeys(ctx); !errors.Is(err, records.ErrNoNextHostKey) {
		t.Fatalf("promote with nothing next: %v", err)
	}

	// Back to a retired key at once (the one partners know), and a new one.
	if err := st.ActivateHostKey(ctx, hostKey("ssh-ed25519", "a", "")); err != nil {
		t.Fatal(err)
	}
	if err := st.ActivateHostKey(ctx, hostKey("ecdsa-sha2-nistp256", "g", "")); err != nil {
		t.Fatal(err)
	}
	want = map[string]records.HostKeyState{"SHA256:a": records.HostKeyActive, "SHA256:c": records.HostKeyRetired,
		"SHA256:d": records.HostKeyRetired, "SHA256:g": records.HostKeyActive}
	if got := hostKeyStates(t, st); !maps.Equal(got, want) {
		t.Fatalf("after activations %v, want %v", got, want)
	}

	if _, err := st.Pool().Exec(ctx, `UPDATE ssh_host_keys SET sealed = (SELECT sealed FROM ssh_host_keys WHERE fingerprint = 'SHA256:a')
		WHERE fingerprint = 'SHA256:g'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.HostKeys(ctx); err == nil {
		t.Fatal("a sealed key moved onto another key's row opened")
	}
}
