package partnerauth_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

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
