package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of sessions.sql.
var (
	sqlCreateSession        = query("CreateSession")
	sqlSweepExpiredSessions = query("SweepExpiredSessions")
	sqlSessionByToken       = query("SessionByToken")
	sqlDeleteSession        = query("DeleteSession")
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
	_, err := s.pool.Exec(ctx, sqlCreateSession, tokenHash, reviewer, kind, csrf, expires)
	if err != nil {
		return fmt.Errorf("create session for reviewer %q: %w", reviewer, err)
	}
	// Expired sessions are swept as new ones are made.
	if _, err := s.pool.Exec(ctx, sqlSweepExpiredSessions); err != nil {
		return fmt.Errorf("sweep expired sessions: %w", err)
	}
	return nil
}

// SessionByToken reads an unexpired session of an active reviewer, or ErrNotFound.
func (s *Store) SessionByToken(ctx context.Context, tokenHash []byte, kind string) (Session, error) {
	var ss Session
	err := s.pool.QueryRow(ctx, sqlSessionByToken, tokenHash, kind).
		Scan(ss.Reviewer.scanDest(&ss.Kind, &ss.CSRFToken, &ss.ExpiresAt)...)
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
	if _, err := s.pool.Exec(ctx, sqlDeleteSession, tokenHash); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}
