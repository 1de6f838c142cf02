package records

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Statements of webhooksecrets.sql.
var (
	sqlRevokeOldWebhookSecrets = query("RevokeOldWebhookSecrets")
	sqlAddWebhookSecret        = query("AddWebhookSecret")
	sqlWebhookSecrets          = query("WebhookSecrets")
	sqlWebhookSecretsToReseal  = query("WebhookSecretsToReseal")
	sqlResealWebhookSecret     = query("ResealWebhookSecret")
)

// Webhook secrets (Standard Webhooks): "whsec_" + base64 of 32 random bytes.
// Checking an HMAC needs the key itself, so it cannot be stored as a hash:
// it is stored sealed (sealing.go).

// WebhookSecretPrefix starts every webhook secret.
const WebhookSecretPrefix = "whsec_"

// AddWebhookSecret creates a new signing secret for partner and returns it
// in its printable form. Earlier secrets keep working until revoked, so the
// sender can switch over without losing a delivery.
func (s *Store) AddWebhookSecret(ctx context.Context, partner string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate webhook secret: %w", err)
	}
	sealed, err := s.sealSecret(partner, b[:])
	if err != nil {
		return "", fmt.Errorf("seal the webhook secret of partner %q: %w", partner, err)
	}
	if _, err := s.pool.Exec(ctx, sqlAddWebhookSecret, partner, sealed); err != nil {
		return "", fmt.Errorf("store webhook secret for partner %q: %w", partner, err)
	}
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// RevokeOldWebhookSecrets revokes every active secret of partner but the
// newest, and returns how many it revoked.
func (s *Store) RevokeOldWebhookSecrets(ctx context.Context, partner string) (int64, error) {
	return s.revokeAllButNewest(ctx, sqlRevokeOldWebhookSecrets, "webhook secrets", partner)
}

// WebhookSecrets returns the active signing keys of partner (none for an
// unknown partner), newest first.
func (s *Store) WebhookSecrets(ctx context.Context, partner string) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, sqlWebhookSecrets, partner)
	if err != nil {
		return nil, fmt.Errorf("read webhook secrets of partner %q: %w", partner, err)
	}
	sealed, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("read webhook secrets of partner %q: %w", partner, err)
	}
	keys := make([][]byte, 0, len(sealed))
	for _, b := range sealed {
		k, err := s.openSecret(partner, b)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// resealWebhookSecrets seals every webhook secret sealed under another key
// than the sealing one again under it, in tx; it returns how many it sealed
// again. A secret's associated data is its partner's id.
func resealWebhookSecrets(ctx context.Context, tx pgx.Tx, ks *SecretKeys) (int, error) {
	return ks.resealAll(ctx, tx, "webhook secret", sqlWebhookSecretsToReseal, sqlResealWebhookSecret, func(partner string) string { return partner })
}

// ParseWebhookSecret decodes a printable secret ("whsec_" + base64) to its key.
func ParseWebhookSecret(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, WebhookSecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("webhook secret is not %s followed by base64: %w", WebhookSecretPrefix, err)
	}
	return b, nil
}

// WebhookSignature is the Standard Webhooks signature of a message under one
// key: HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}"). The
// webhook receiver checks it (intake/httpapi) and result notifications are
// signed with it (package notify); this is the one place the rule is written.
func WebhookSignature(key []byte, id, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// WebhookTimestamp is a webhook-timestamp header value: Unix seconds.
func WebhookTimestamp(unix int64) string { return strconv.FormatInt(unix, 10) }
