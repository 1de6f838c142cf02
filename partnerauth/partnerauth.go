// Package partnerauth checks a partner's credentials at the HTTP doors: the
// API token a request to /v1/submissions carries (Bearer), and the Standard
// Webhooks signature of a webhook delivery. The credentials themselves are
// issued, sealed and revoked by the store (records: apitokens.go,
// webhooksecrets.go); the signature rule is written once there
// (records.WebhookSignature) and used here and by package notify.
//
// The doors (intake/httpapi) ask this package whose a request is, and
// intake what to do with it: they never read the store themselves.
package partnerauth

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/records"
)

// Checker checks partners' credentials against the store.
type Checker struct {
	st       *records.Store
	refusals *prometheus.CounterVec
}

// Option adjusts a Checker.
type Option func(*Checker)

// WithMetrics registers the Checker's refusal counter on reg.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *Checker) { reg.MustRegister(c.refusals) }
}

// New returns a Checker on st.
func New(st *records.Store, opts ...Option) *Checker {
	c := &Checker{st: st, refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payintake_partner_refusals_total",
		Help: "A partner's valid credentials refused, by door (sftp, http, webhook) and reason (address_not_allowed: the client address is not in the partner's --allow-from).",
	}, []string{"door", "reason"})}
	for _, o := range opts {
		o(c)
	}
	return c
}

// The doors a partner's credentials are used at, as AllowedFrom counts and
// audits them.
const (
	DoorSFTP    = records.ViaSFTP
	DoorHTTP    = records.ViaHTTP
	DoorWebhook = records.ViaWebhook
)

// ReasonAddressNotAllowed is the refusal of a client address outside the
// partner's allowlist.
const ReasonAddressNotAllowed = "address_not_allowed"

// AllowedFrom reports whether partner's credentials, just checked at door
// (DoorSFTP, DoorHTTP, DoorWebhook), may be used from the client
// address addr (payintake partner set --allow-from). A refusal is written
// to the audit trail, naming the address, and counted; the door answers it
// as it answers bad credentials, and logs it. An error: it could not be
// checked.
func (c *Checker) AllowedFrom(ctx context.Context, partner, door string, addr netip.Addr) (bool, error) {
	ok, nets, err := c.st.PartnerAllowsFrom(ctx, partner, addr)
	if err != nil {
		return false, err
	}
	if ok {
		return true, nil
	}
	c.refusals.WithLabelValues(door, ReasonAddressNotAllowed).Inc()
	allowed := make([]string, len(nets))
	for i, n := range nets {
		allowed[i] = n.String()
	}
	err = c.st.Audit(ctx, records.AuditEntry{Actor: partner, Via: door, Action: "address_refused", PartnerID: partner,
		Detail: fmt.Sprintf("client address %s is not in allow-from %s", addr, strings.Join(allowed, ","))})
	return false, err
}

// maxTokenLen bounds a token before it is hashed and looked up: every
// issued token is far shorter.
const maxTokenLen = 200

// ErrMalformedToken: the token cannot be one this server issued (wrong
// prefix, too long); nothing was looked up.
var ErrMalformedToken = errors.New("not an API token")

// ErrUnknownToken: the token is well formed but no active token of any
// partner (never issued, or revoked).
var ErrUnknownToken = errors.New("unknown or revoked API token")

// TokenPartner returns the partner an active API token belongs to. It
// returns ErrMalformedToken or ErrUnknownToken when the token gives no
// partner, any other error when it could not be checked.
func (c *Checker) TokenPartner(ctx context.Context, token string) (string, error) {
	if !strings.HasPrefix(token, records.TokenPrefix) || len(token) > maxTokenLen {
		return "", ErrMalformedToken
	}
	partner, err := c.st.TokenPartner(ctx, token)
	if errors.Is(err, records.ErrNotFound) {
		return "", ErrUnknownToken
	}
	if err != nil {
		return "", fmt.Errorf("check the API token: %w", err)
	}
	return partner, nil
}

// WebhookSigned reports whether header (webhook-signature: space-separated
// "v1,<base64>") holds a signature of "id.timestamp.body" under an active
// secret of partner. A malformed partner (not a partner ID: invalid UTF-8,
// upper case, too long) is an unknown one: no secret of it can match. An
// error means the secrets could not be read.
func (c *Checker) WebhookSigned(ctx context.Context, partner, id, timestamp string, body []byte, header string) (bool, error) {
	if !records.ValidPartnerID(partner) {
		return false, nil
	}
	keys, err := c.st.WebhookSecrets(ctx, partner)
	if err != nil {
		return false, fmt.Errorf("read the webhook secrets: %w", err)
	}
	return signatureValid(keys, id, timestamp, body, header), nil
}

func signatureValid(keys [][]byte, id, ts string, body []byte, header string) bool {
	var given [][]byte
	for _, sig := range strings.Fields(header) {
		ver, val, ok := strings.Cut(sig, ",")
		if !ok || ver != "v1" {
			continue
		}
		if b, err := base64.StdEncoding.DecodeString(val); err == nil {
			given = append(given, b)
		}
	}
	for _, k := range keys {
		want := records.WebhookSignature(k, id, ts, body)
		for _, g := range given {
			if hmac.Equal(g, want) {
				return true
			}
		}
	}
	return false
}

// Sign returns a Standard Webhooks signature ("v1,<base64>") of body with
// the secret in its printable form (whsec_...), for senders and tests.
func Sign(secret, id string, ts int64, body []byte) (string, error) {
	key, err := records.ParseWebhookSecret(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(records.WebhookSignature(key, id, records.WebhookTimestamp(ts), body)), nil
}
