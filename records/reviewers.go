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

// Statements of reviewers.sql.
var (
	sqlAddReviewer               = query("AddReviewer")
	sqlSetReviewerPassword       = query("SetReviewerPassword")
	sqlEndReviewerSessions       = query("EndReviewerSessions")
	sqlReviewerDisabledForUpdate = query("ReviewerDisabledForUpdate")
	sqlSetReviewerDisabled       = query("SetReviewerDisabled")
	sqlReviewerByName            = query("ReviewerByName")
	sqlReviewers                 = query("Reviewers")
)

// Reviewer is an account that may decide exceptions.
type Reviewer struct {
	Name      string    `json:"name"`
	Partners  []string  `json:"partners"` // empty: every partner
	CreatedAt time.Time `json:"created_at"`
	Disabled  bool      `json:"disabled"`
}

// scanDest is where a reviewer's columns are scanned, in the order every
// query that reads a reviewer selects them first: name, partners,
// created_at, disabled.
func (r *Reviewer) scanDest(more ...any) []any {
	return append([]any{&r.Name, &r.Partners, &r.CreatedAt, &r.Disabled}, more...)
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
	_, err := s.pool.Exec(ctx, sqlAddReviewer,
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
		tag, err := tx.Exec(ctx, sqlSetReviewerPassword, name, passwordHash)
		if err != nil {
			return fmt.Errorf("set password of reviewer %q: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("reviewer %q: %w", name, ErrNotFound)
		}
		if _, err := tx.Exec(ctx, sqlEndReviewerSessions, name); err != nil {
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
		err := tx.QueryRow(ctx, sqlReviewerDisabledForUpdate, name).Scan(&was)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("reviewer %q: %w", name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read reviewer %q: %w", name, err)
		}
		changed = was != disabled
		if _, err := tx.Exec(ctx, sqlSetReviewerDisabled, name, disabled); err != nil {
			return fmt.Errorf("update reviewer %q: %w", name, err)
		}
		if disabled {
			if _, err := tx.Exec(ctx, sqlEndReviewerSessions, name); err != nil {
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
	err := s.pool.QueryRow(ctx, sqlReviewerByName, name).Scan(r.scanDest(&hash)...)
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
	rows, err := s.pool.Query(ctx, sqlReviewers)
	if err != nil {
		return nil, fmt.Errorf("list reviewers: %w", err)
	}
	rs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Reviewer, error) {
		var r Reviewer
		err := row.Scan(r.scanDest()...)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list reviewers: %w", err)
	}
	return rs, nil
}
