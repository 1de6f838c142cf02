package records

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of apitokens.sql.
var (
	sqlRevokeOldAPITokens = query("RevokeOldAPITokens")
	sqlIssueAPIToken      = query("IssueAPIToken")
	sqlTokenPartner       = query("TokenPartner")
	sqlAPITokens          = query("APITokens")
	sqlAPITokenForRevoke  = query("APITokenForRevoke")
	sqlRevokeAPIToken     = query("RevokeAPIToken")
)

// API tokens of the HTTP submission API.
//
// A token is "pit_" followed by 32 random bytes in unpadded base64url. Only
// its SHA-256 is stored. A plain fast hash is right here, unlike for
// passwords: a token has 256 bits of entropy, so there is nothing to
// brute-force from a leaked hash, and a salted slow hash would only make
// every request slower (and make a lookup by hash impossible).

// TokenPrefix starts every API token, so a leaked one is recognisable.
const TokenPrefix = "pit_"

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// IssueAPIToken creates a new API token for partner and returns it. It is
// shown once: only its hash is kept. Earlier tokens stay valid.
func (s *Store) IssueAPIToken(ctx context.Context, partner string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	_, err := s.pool.Exec(ctx, sqlIssueAPIToken,
		partner, tokenHash(token), token[:len(TokenPrefix)+6])
	if err != nil {
		return "", fmt.Errorf("store token for partner %q: %w", partner, err)
	}
	return token, nil
}

// RevokeOldAPITokens revokes every active token of partner but the newest,
// and returns how many it revoked.
func (s *Store) RevokeOldAPITokens(ctx context.Context, partner string) (int64, error) {
	return s.revokeAllButNewest(ctx, sqlRevokeOldAPITokens, "tokens", partner)
}

// revokeAllButNewest runs revoke (RevokeOldAPITokens or
// RevokeOldWebhookSecrets: every active credential of partner but the
// newest) and returns how many it revoked; what names them in the error.
func (s *Store) revokeAllButNewest(ctx context.Context, revoke, what, partner string) (int64, error) {
	tag, err := s.pool.Exec(ctx, revoke, partner)
	if err != nil {
		return 0, fmt.Errorf("revoke %s of partner %q: %w", what, partner, err)
	}
	return tag.RowsAffected(), nil
}

// TokenPartner returns the partner an active API token belongs to, or ErrNotFound.
func (s *Store) TokenPartner(ctx context.Context, token string) (string, error) {
	var partner string
	// last_used_at is written at most once a minute per token, so a busy
	// partner's requests do not all write the same row.
	err := s.pool.QueryRow(ctx, sqlTokenPartner, tokenHash(token)).Scan(&partner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("api token: %w", ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("check api token: %w", err)
	}
	return partner, nil
}

// APIToken is what an operator sees of an API token: never the token, only
// its first characters.
type APIToken struct {
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"` // to the minute; nil: never used
	RevokedAt  *time.Time `json:"revoked_at"`   // nil: active
}

// APITokens lists partner's API tokens, active and revoked, oldest first.
func (s *Store) APITokens(ctx context.Context, partner string) ([]APIToken, error) {
	rows, err := s.pool.Query(ctx, sqlAPITokens, partner)
	if err != nil {
		return nil, fmt.Errorf("list api tokens of partner %q: %w", partner, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (APIToken, error) {
		var t APIToken
		err := row.Scan(&t.Prefix, &t.CreatedAt, &t.LastUsedAt, &t.RevokedAt)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list api tokens of partner %q: %w", partner, err)
	}
	return out, nil
}

// ErrAmbiguous: a prefix names more than one active token.
var ErrAmbiguous = errors.New("ambiguous")

// RevokeAPIToken revokes partner's one active token starting with prefix.
// The API refuses it from the next request on (tokens are checked on every
// request, never cached). A prefix matching no active token is ErrNotFound;
// one matching several is ErrAmbiguous and revokes nothing.
func (s *Store) RevokeAPIToken(ctx context.Context, partner, prefix string) error {
	if len(prefix) < len(TokenPrefix)+6 {
		return fmt.Errorf("token prefix %q is too short: give the prefix `partner token list` shows (%s + 6 characters): %w",
			prefix, TokenPrefix, ErrNotFound)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The listing shows prefix, the token's first 10 characters; a longer
		// prefix (up to the whole token) is compared on those 10.
		short := prefix[:len(TokenPrefix)+6]
		var ids []int64
		rows, err := tx.Query(ctx, sqlAPITokenForRevoke,
			partner, short)
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		if err != nil {
			return fmt.Errorf("revoke api token of partner %q: %w", partner, err)
		}
		switch {
		case len(ids) == 0:
			return fmt.Errorf("no active API token of partner %q starts with %q (see `partner token list %s`): %w", partner, prefix, partner, ErrNotFound)
		case len(ids) > 1:
			return fmt.Errorf("%d active API tokens of partner %q start with %q; nothing revoked: revoke all but the newest with `partner token %s --revoke-old`, or issue a new token first: %w",
				len(ids), partner, prefix, partner, ErrAmbiguous)
		}
		if _, err := tx.Exec(ctx, sqlRevokeAPIToken, ids[0]); err != nil {
			return fmt.Errorf("revoke api token of partner %q: %w", partner, err)
		}
		return nil
	})
}
