package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Session is a logged-in reviewer: a console cookie or an API bearer token.
type Session struct {
	Reviewer  Reviewer
	Kind      string // console, api
	CSRFToken string
	ExpiresAt time.Time
}

// CreateSession stores a session by the SHA-256 of its token.
func (s *Store) CreateSession(ctx context.Context, tokenHash []byte, reviewer, kind, csrf string, expires time.Time) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO reviewer_sessions (token_hash, reviewer, kind, csrf_token, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, tokenHash, reviewer, kind, csrf, expires)
	if err != nil {
		return fmt.Errorf("create session for reviewer %q: %w", reviewer, err)
	}
	// Expired sessions are swept as new ones are made.
	if _, err := s.pool.Exec(ctx, `DELETE FROM reviewer_sessions WHERE expires_at < now()`); err != nil {
		return fmt.Errorf("sweep expired sessions: %w", err)
	}
	return nil
}

// SessionByToken reads an unexpired session of an active reviewer, or ErrNotFound.
func (s *Store) SessionByToken(ctx context.Context, tokenHash []byte, kind string) (Session, error) {
	var ss Session
	err := s.pool.QueryRow(ctx, `SELECT r.name, r.partners, r.created_at, s.kind, s.csrf_token, s.expires_at
		FROM reviewer_sessions s JOIN reviewers r ON r.name = s.reviewer
		WHERE s.token_hash = $1 AND s.kind = $2 AND s.expires_at > now() AND r.disabled_at IS NULL`, tokenHash, kind).
		Scan(&ss.Reviewer.Name, &ss.Reviewer.Partners, &ss.Reviewer.CreatedAt, &ss.Kind, &ss.CSRFToken, &ss.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ss, fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return ss, fmt.Errorf("read session: %w", err)
	}
	return ss, nil
}

// DeleteSession ends a session (logout).
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM reviewer_sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}
