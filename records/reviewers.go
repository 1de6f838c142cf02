package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reviewer is an account that may decide exceptions.
type Reviewer struct {
	Name      string    `json:"name"`
	Partners  []string  `json:"partners"` // empty: every partner
	CreatedAt time.Time `json:"created_at"`
	Disabled  bool      `json:"disabled"`
}

// AddReviewer creates a reviewer account with an already hashed password.
// It returns ErrExists if the name is taken and ErrNotFound for an unknown partner.
func (s *Store) AddReviewer(ctx context.Context, name, passwordHash string, partners []string) error {
	if partners == nil {
		partners = []string{}
	}
	for _, p := range partners {
		if _, err := s.Partner(ctx, p); err != nil {
			return err
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO reviewers (name, password_hash, partners) VALUES ($1, $2, $3)`,
		name, passwordHash, partners)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return fmt.Errorf("reviewer %q: %w", name, ErrExists)
	}
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.CheckViolation {
		return fmt.Errorf("reviewer name %q must be letters, digits, '.', '_', '@' or '-' (at most 64)", name)
	}
	if err != nil {
		return fmt.Errorf("add reviewer %q: %w", name, err)
	}
	return nil
}

// SetReviewerPassword replaces a reviewer's password hash and ends their sessions.
func (s *Store) SetReviewerPassword(ctx context.Context, name, passwordHash string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE reviewers SET password_hash = $2 WHERE name = $1`, name, passwordHash)
		if err != nil {
			return fmt.Errorf("set password of reviewer %q: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("reviewer %q: %w", name, ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM reviewer_sessions WHERE reviewer = $1`, name); err != nil {
			return fmt.Errorf("end sessions of reviewer %q: %w", name, err)
		}
		return nil
	})
}

// SetReviewerDisabled disables a reviewer account (ending all its sessions
// in the same transaction, so nothing they hold works a moment longer) or
// enables it again. It reports whether anything changed, or ErrNotFound.
func (s *Store) SetReviewerDisabled(ctx context.Context, name string, disabled bool) (bool, error) {
	var changed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var was bool
		err := tx.QueryRow(ctx, `SELECT disabled_at IS NOT NULL FROM reviewers WHERE name = $1 FOR UPDATE`, name).Scan(&was)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("reviewer %q: %w", name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read reviewer %q: %w", name, err)
		}
		changed = was != disabled
		if _, err := tx.Exec(ctx, `UPDATE reviewers SET disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END
			WHERE name = $1`, name, disabled); err != nil {
			return fmt.Errorf("update reviewer %q: %w", name, err)
		}
		if disabled {
			if _, err := tx.Exec(ctx, `DELETE FROM reviewer_sessions WHERE reviewer = $1`, name); err != nil {
				return fmt.Errorf("end sessions of reviewer %q: %w", name, err)
			}
		}
		return nil
	})
	return changed, err
}

// ReviewerByName reads an active reviewer and their password hash, or ErrNotFound.
func (s *Store) ReviewerByName(ctx context.Context, name string) (Reviewer, string, error) {
	var r Reviewer
	var hash string
	err := s.pool.QueryRow(ctx, `SELECT name, partners, created_at, password_hash FROM reviewers
		WHERE name = $1 AND disabled_at IS NULL`, name).Scan(&r.Name, &r.Partners, &r.CreatedAt, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, "", fmt.Errorf("reviewer %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return r, "", fmt.Errorf("read reviewer %q: %w", name, err)
	}
	return r, hash, nil
}

// Reviewers lists every reviewer account by name.
func (s *Store) Reviewers(ctx context.Context) ([]Reviewer, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, partners, created_at, disabled_at IS NOT NULL FROM reviewers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list reviewers: %w", err)
	}
	rs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Reviewer, error) {
		var r Reviewer
		err := row.Scan(&r.Name, &r.Partners, &r.CreatedAt, &r.Disabled)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list reviewers: %w", err)
	}
	return rs, nil
}
