package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

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
	rows, err := s.pool.Query(ctx, `SELECT prefix, created_at, last_used_at, revoked_at FROM api_tokens
		WHERE partner_id = $1 ORDER BY id`, partner)
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
		rows, err := tx.Query(ctx, `SELECT id FROM api_tokens WHERE partner_id = $1 AND prefix = $2 AND revoked_at IS NULL FOR UPDATE`,
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
		if _, err := tx.Exec(ctx, `UPDATE api_tokens SET revoked_at = now() WHERE id = $1`, ids[0]); err != nil {
			return fmt.Errorf("revoke api token of partner %q: %w", partner, err)
		}
		return nil
	})
}
