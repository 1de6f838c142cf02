package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

func TestPartnerTokenListRevoke(t *testing.T) {
	c := &cli{t: t, url: pgtest.New(t), dir: t.TempDir()}
	ctx := context.Background()
	c.ok("partner", "add", "acme")
	lastLine := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		return lines[len(lines)-1]
	}
	first := lastLine(c.ok("partner", "token", "acme"))
	second := lastLine(c.ok("partner", "token", "acme"))
	st := openStore(t, c.url)
	if _, err := st.TokenPartner(ctx, first); err != nil { // marks it used
		t.Fatal(err)
	}

	var list []records.APIToken
	if err := json.Unmarshal([]byte(c.ok("partner", "token", "list", "acme", "--format", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Prefix != first[:10] || list[1].Prefix != second[:10] ||
		list[0].LastUsedAt == nil || list[1].LastUsedAt != nil || list[0].RevokedAt != nil {
		t.Fatalf("token list %+v", list)
	}
	table := c.ok("partner", "token", "list", "acme")
	if !strings.Contains(table, "PREFIX") || !strings.Contains(table, first[:10]) || strings.Contains(table, first[10:]) {
		t.Fatalf("token table shows the token or misses its prefix:\n%s", table)
	}

	c.ok("partner", "token", "revoke", "acme", first[:10])
	if _, err := st.TokenPartner(ctx, first); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("revoked token still accepted: %v", err)
	}
	if p, err := st.TokenPartner(ctx, second); err != nil || p != "acme" {
		t.Fatalf("the other token: %q %v", p, err)
	}
	if code, _, errs := c.run("partner", "token", "revoke", "acme", first[:10]); code != 1 || !strings.Contains(errs, "no active API token") {
		t.Fatalf("revoking twice: exit %d %q", code, errs)
	}
	if code, _, _ := c.run("partner", "token", "revoke", "acme"); code != 2 {
		t.Fatalf("revoke without prefix: exit %d", code)
	}
	if code, _, errs := c.run("partner", "token", "list", "nobody"); code != 1 || !strings.Contains(errs, "unknown partner") {
		t.Fatalf("list of an unknown partner: exit %d %q", code, errs)
	}
}
