package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/internal/openapicheck"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/records"
)

// TestAllowFrom: a partner with an allowlist has its API token and webhook
// secret work only from its client addresses (behind the trusted proxy,
// the X-Forwarded-For it appended). From elsewhere, the answer is the one a
// revoked token or a bad signature gets, byte for byte; the refusal is
// audited with the address and counted. Another partner is unaffected.
func TestAllowFrom(t *testing.T) {
	e := newEnv(t, Config{})
	reg := prometheus.NewRegistry()
	e.api = New(intake.New(e.st, nil), partnerauth.New(e.st, partnerauth.WithMetrics(reg)), Config{SpoolDir: t.TempDir()})
	proxies, err := clientaddr.Parse("127.0.0.1", clientaddr.XForwardedFor)
	if err != nil {
		t.Fatal(err)
	}
	// Behind the trusted proxy, every answer still held against the document.
	e.srv = httptest.NewServer(openapicheck.Handler(t, openapicheck.MustParse(t, openAPI), proxies.Middleware(e.api.Handler())))
	t.Cleanup(e.srv.Close)
	nets := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	if err := e.st.UpdatePartner(e.ctx, "acme", records.PartnerUpdate{AllowFrom: &nets}); err != nil {
		t.Fatal(err)
	}
	// The token of partner "other", revoked, gives the answer to compare.
	revoked := e.token["other"]
	if err := e.st.RevokeAPIToken(e.ctx, "other", revoked[:10]); err != nil {
		t.Fatal(err)
	}

	submit := func(token, client string) resp {
		req := e.submitReq("acme", "k-"+client, "pay.csv", strings.NewReader(csvRows("E1,2026-11,BASE,1.00,USD")))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Forwarded-For", client)
		return e.do(req)
	}
	hook := func(partner, client, id string) resp {
		body := change("ent-"+id, 1, "E2", "2.00")
		ts := time.Now()
		sig, err := Sign(e.secret[partner], id, ts.Unix(), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", e.srv.URL+"/v1/webhooks/"+partner, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		req.Header.Set("X-Forwarded-For", client)
		return e.do(req)
	}

	refused := submit(e.token["acme"], "203.0.113.5")
	bad := submit(revoked, "203.0.113.5")
	wantProblem(t, refused, http.StatusUnauthorized, "unauthorized")
	if string(refused.body) != string(bad.body) || refused.header.Get("WWW-Authenticate") != bad.header.Get("WWW-Authenticate") {
		t.Errorf("refused address answered %s, a revoked token %s: want the same", refused.body, bad.body)
	}
	wantStatus(t, submit(e.token["acme"], "198.51.100.7"), http.StatusCreated)

	refused = hook("acme", "203.0.113.6", "msg-1")
	wantProblem(t, refused, http.StatusUnauthorized, "signature_invalid")
	badSig := e.hookRaw("acme", "msg-1", strconv.FormatInt(time.Now().Unix(), 10), "v1,AAAA", change("ent-msg-1", 1, "E2", "2.00"))
	if string(refused.body) != string(badSig.body) {
		t.Errorf("refused webhook answered %s, a bad signature %s: want the same", refused.body, badSig.body)
	}
	wantStatus(t, hook("acme", "198.51.100.8", "msg-2"), http.StatusOK)
	wantStatus(t, hook("other", "203.0.113.6", "msg-3"), http.StatusOK)

	if n := e.count(`SELECT count(*) FROM review_audit WHERE action = 'address_refused' AND partner_id = 'acme'
		AND ((via = 'http' AND detail LIKE '%203.0.113.5 %') OR (via = 'webhook' AND detail LIKE '%203.0.113.6 %'))`); n != 2 {
		t.Errorf("%d audit rows of the refusals, want 2 (one per door, naming the address)", n)
	}
	for door, want := range map[string]float64{"http": 1, "webhook": 1} {
		if got := refusals(t, reg, door); got != want {
			t.Errorf("refusals at %s: %v, want %v", door, got, want)
		}
	}
	if n := e.count(`SELECT count(*) FROM envelopes WHERE partner_id = 'acme'`); n != 1 {
		t.Errorf("%d envelopes of acme, want 1 (the allowed submission only)", n)
	}
}

// refusals is payintake_partner_refusals_total{door, address_not_allowed}.
func refusals(t *testing.T, reg *prometheus.Registry, door string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "payintake_partner_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["door"] == door && labels["reason"] == partnerauth.ReasonAddressNotAllowed {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
