package records_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// TestPartnerAllowsFrom: a partner without an allowlist is allowed from
// anywhere; with one, only from its ranges (IPv4 and IPv6, an IPv4-mapped
// address as its IPv4 self); setting it empty lifts it; an unknown partner
// is ErrNotFound. The partner reads its list back.
func TestPartnerAllowsFrom(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	allows := func(a string) bool {
		t.Helper()
		ok, _, err := st.PartnerAllowsFrom(ctx, "acme", netip.MustParseAddr(a))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !allows("203.0.113.9") {
		t.Error("no allowlist: refused")
	}
	nets := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("192.0.2.7/32")}
	if err := st.UpdatePartner(ctx, "acme", records.PartnerUpdate{AllowFrom: &nets}); err != nil {
		t.Fatal(err)
	}
	for a, want := range map[string]bool{"198.51.100.200": true, "198.51.101.1": false, "2001:db8::5": true, "2001:db9::5": false,
		"192.0.2.7": true, "192.0.2.8": false, "::ffff:198.51.100.3": true, "203.0.113.9": false} {
		if got := allows(a); got != want {
			t.Errorf("from %s: allowed %v, want %v", a, got, want)
		}
	}
	p, err := st.Partner(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.AllowFrom) != 3 || p.AllowFrom[0] != nets[0] || p.AllowFrom[2] != nets[2] {
		t.Errorf("partner's allow_from %v, want %v", p.AllowFrom, nets)
	}
	none := []netip.Prefix{}
	if err := st.UpdatePartner(ctx, "acme", records.PartnerUpdate{AllowFrom: &none}); err != nil {
		t.Fatal(err)
	}
	if !allows("203.0.113.9") {
		t.Error("allowlist lifted: still refused")
	}
	if _, _, err := st.PartnerAllowsFrom(ctx, "nobody", netip.MustParseAddr("192.0.2.1")); !errors.Is(err, records.ErrNotFound) {
		t.Errorf("unknown partner: %v, want ErrNotFound", err)
	}
}
