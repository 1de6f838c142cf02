package records_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// TestPartnerProfileVersions: every profile set is a new version, kept with
// who set it; the partner reads the latest, the settings it gives are the
// partner's, and the audit names each change.
func TestPartnerProfileVersions(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	if err := st.AddPartner(ctx, records.Partner{ID: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	p, err := st.Partner(ctx, "acme")
	if err != nil || p.Profile != nil {
		t.Fatalf("a new partner's profile = %+v (%v), want none", p.Profile, err)
	}
	if _, _, err := st.PartnerProfile(ctx, "acme", 0); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("PartnerProfile without one = %v, want ErrNotFound", err)
	}
	semi := ";"
	v1, err := st.SetPartnerProfile(ctx, "acme", "components:\n  REG: BASE\n",
		records.PartnerProfile{Components: map[string]string{"REG": "BASE"}, UnknownComponent: "reject", Version: 99},
		records.PartnerUpdate{Delimiter: &semi}, "alice", records.ViaCLI)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := st.SetPartnerProfile(ctx, "acme", "components:\n  REG: BASE\n  OT: OVERTIME\n",
		records.PartnerProfile{Components: map[string]string{"REG": "BASE", "OT": "OVERTIME"}, UnknownComponent: "keep"},
		records.PartnerUpdate{}, "bob", records.ViaCLI)
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != 1 || v2.Version != 2 || v1.SetBy != "alice" || v2.SetAt.Before(v1.SetAt) {
		t.Fatalf("versions %+v, %+v: want 1 by alice then 2", v1, v2)
	}
	p, err = st.Partner(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if p.Profile == nil || p.Profile.Version != 2 || p.Profile.SetBy != "bob" || p.Profile.Components["OT"] != "OVERTIME" || p.Profile.UnknownComponent != "keep" {
		t.Fatalf("partner's profile = %+v, want version 2", p.Profile)
	}
	if p.Delimiter != ";" {
		t.Errorf("delimiter = %q, want the profile's ;", p.Delimiter)
	}
	old, yaml, err := st.PartnerProfile(ctx, "acme", 1)
	if err != nil || old.Version != 1 || old.SetBy != "alice" || yaml != "components:\n  REG: BASE\n" || old.UnknownComponent != "reject" {
		t.Fatalf("version 1 = %+v %q (%v)", old, yaml, err)
	}
	all, err := st.PartnerProfiles(ctx, "acme")
	if err != nil || len(all) != 2 || all[0].Version != 1 || all[1].Version != 2 {
		t.Fatalf("PartnerProfiles = %+v (%v)", all, err)
	}
	log, err := st.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range log {
		if e.Action == "profile_set" && e.PartnerID == "acme" {
			seen = append(seen, e.Actor+" "+e.Detail)
		}
	}
	if len(seen) != 2 || seen[0] != "bob profile version 2" || seen[1] != "alice profile version 1" {
		t.Errorf("audit = %q", seen)
	}
	if _, err := st.SetPartnerProfile(ctx, "nobody", "", records.PartnerProfile{}, records.PartnerUpdate{}, "alice", records.ViaCLI); !errors.Is(err, records.ErrNotFound) {
		t.Errorf("unknown partner: %v", err)
	}
}

// TestPartnerProfileSetConcurrently: profiles set at once get one version
// each, one after the other.
func TestPartnerProfileSetConcurrently(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	versions := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, err := st.SetPartnerProfile(ctx, "acme", fmt.Sprintf("# %d\n", i), records.PartnerProfile{}, records.PartnerUpdate{}, "op", records.ViaCLI)
			if err != nil {
				t.Error(err)
				return
			}
			versions <- pr.Version
		}()
	}
	wg.Wait()
	close(versions)
	seen := map[int]bool{}
	for v := range versions {
		seen[v] = true
	}
	for v := 1; v <= n; v++ {
		if !seen[v] {
			t.Errorf("versions %v lack %d", seen, v)
		}
	}
}
