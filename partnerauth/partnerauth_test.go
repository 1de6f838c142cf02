package partnerauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestCredentials: an issued token gives its partner until it is revoked;
// a token of another shape is refused before any lookup; a webhook is
// signed only by an active secret of the partner named, and a malformed
// partner has none.
func TestCredentials(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	for _, id := range []string{"acme", "globex"} {
		if err := st.AddPartner(ctx, records.Partner{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	c := partnerauth.New(st)
	token, err := st.IssueAPIToken(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := st.AddWebhookSecret(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC).Unix()
	body := []byte(`{"entity_id":"e1"}`)
	sig, err := partnerauth.Sign(secret, "msg_1", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	stamp := records.WebhookTimestamp(ts)

	tokens := map[string]struct {
		token   string
		partner string
		err     error
	}{
		"an issued token":               {token, "acme", nil},
		"a token that was never issued": {records.TokenPrefix + "nope", "", partnerauth.ErrUnknownToken},
		"another prefix":                {"xyz_" + token[len(records.TokenPrefix):], "", partnerauth.ErrMalformedToken},
		"a token far too long":          {token + string(make([]byte, 300)), "", partnerauth.ErrMalformedToken},
	}
	for name, tc := range tokens {
		t.Run(name, func(t *testing.T) {
			got, err := c.TokenPartner(ctx, tc.token)
			if got != tc.partner || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("TokenPartner = %q, %v; want %q, %v", got, err, tc.partner, tc.err)
			}
		})
	}

	signed := map[string]struct {
		partner, id string
		body        []byte
		header      string
		want        bool
	}{
		"the partner's signature": {"acme", "msg_1", body, sig, true},
		"among other signatures":  {"acme", "msg_1", body, "v1,AAAA v2,x " + sig, true},
		"another body":            {"acme", "msg_1", []byte(`{}`), sig, false},
		"another webhook-id":      {"acme", "msg_2", body, sig, false},
		"another partner":         {"globex", "msg_1", body, sig, false},
		"a malformed partner":     {"ACME", "msg_1", body, sig, false},
		"no v1 signature":         {"acme", "msg_1", body, "v2," + sig[3:], false},
	}
	for name, tc := range signed {
		t.Run(name, func(t *testing.T) {
			got, err := c.WebhookSigned(ctx, tc.partner, tc.id, stamp, tc.body, tc.header)
			if err != nil || got != tc.want {
				t.Fatalf("WebhookSigned = %v, %v; want %v", got, err, tc.want)
			}
		})
	}

	if err := st.RevokeAPIToken(ctx, "acme", token[:len(records.TokenPrefix)+8]); err != nil {
		t.Fatal(err)
	}
	if got, err := c.TokenPartner(ctx, token); !errors.Is(err, partnerauth.ErrUnknownToken) {
		t.Fatalf("revoked token: TokenPartner = %q, %v; want ErrUnknownToken", got, err)
	}
}

// TestAllowedFrom: an address in the partner's allow-from (or any, without
// one) passes silently; another is refused with one audit row naming it
// and the door, and one count.
func TestAllowedFrom(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t)
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := partnerauth.New(st, partnerauth.WithMetrics(reg))
	client := netip.MustParseAddr("203.0.113.9")
	if ok, err := c.AllowedFrom(ctx, "acme", partnerauth.DoorHTTP, client); err != nil || !ok {
		t.Fatalf("no allowlist: %v %v, want allowed", ok, err)
	}
	nets := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	if err := st.UpdatePartner(ctx, "acme", records.PartnerUpdate{AllowFrom: &nets}); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.AllowedFrom(ctx, "acme", partnerauth.DoorHTTP, netip.MustParseAddr("198.51.100.20")); err != nil || !ok {
		t.Fatalf("inside the allowlist: %v %v, want allowed", ok, err)
	}
	if ok, err := c.AllowedFrom(ctx, "acme", partnerauth.DoorWebhook, client); err != nil || ok {
		t.Fatalf("outside the allowlist: %v %v, want refused", ok, err)
	}
	log, err := st.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != "address_refused" || log[0].Via != "webhook" || log[0].PartnerID != "acme" ||
		log[0].Detail != "client address 203.0.113.9 is not in allow-from 198.51.100.0/24" {
		t.Errorf("audit %+v, want one address_refused row of the webhook door naming 203.0.113.9", log)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			counted = append(counted, fmt.Sprintf("%s{%s} %v", mf.GetName(), labels, m.GetCounter().GetValue()))
		}
	}
	if want := "payintake_partner_refusals_total{door=webhook reason=address_not_allowed } 1"; len(counted) != 1 || counted[0] != want {
		t.Errorf("counted %q, want %q", counted, want)
	}
	if _, _, err := st.PartnerAllowsFrom(ctx, "nobody", client); !errors.Is(err, records.ErrNotFound) {
		t.Errorf("unknown partner: %v", err)
	}
}
