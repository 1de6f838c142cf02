package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Mode says how a partner's files are applied.
const (
	ModeRow          = "row"            // each valid row is applied on its own
	ModeAllOrNothing = "all-or-nothing" // one rejected row rejects the whole file
)

// Partner is one sender of payroll files and its file conventions.
type Partner struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Delimiter    string    `json:"delimiter"` // "" means detect
	DecimalComma bool      `json:"decimal_comma"`
	DateFormat   string    `json:"date_format"`
	Currency     string    `json:"currency"`
	FilePattern  string    `json:"file_pattern"`
	Mode         string    `json:"mode"`
	CreatedAt    time.Time `json:"created_at"`
	Keys         int       `json:"keys"` // active SSH keys
}

// ErrExists is returned when a partner or key is added twice.
var ErrExists = errors.New("already exists")

// AddPartner creates a partner. It returns ErrExists if the ID is taken.
func (s *Store) AddPartner(ctx context.Context, p Partner) error {
	if p.Mode == "" {
		p.Mode = ModeRow
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO partners (id, name, delimiter, decimal_comma, date_format, currency, file_pattern, mode)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		p.ID, p.Name, p.Delimiter, p.DecimalComma, p.DateFormat, p.Currency, p.FilePattern, p.Mode)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("partner %q: %w", p.ID, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("add partner %q: %w", p.ID, err)
	}
	return nil
}

const partnerColumns = `p.id, p.name, p.delimiter, p.decimal_comma, p.date_format, p.currency, p.file_pattern, p.mode, p.created_at,
	(SELECT count(*) FROM partner_keys k WHERE k.partner_id = p.id AND k.revoked_at IS NULL)`

func scanPartner(row pgx.Row) (Partner, error) {
	var p Partner
	err := row.Scan(&p.ID, &p.Name, &p.Delimiter, &p.DecimalComma, &p.DateFormat, &p.Currency, &p.FilePattern, &p.Mode, &p.CreatedAt, &p.Keys)
	return p, err
}

// Partner returns one partner, or ErrNotFound.
func (s *Store) Partner(ctx context.Context, id string) (Partner, error) {
	p, err := scanPartner(s.pool.QueryRow(ctx, `SELECT `+partnerColumns+` FROM partners p WHERE p.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("partner %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("read partner %q: %w", id, err)
	}
	return p, nil
}

// Partners lists every partner by ID.
func (s *Store) Partners(ctx context.Context) ([]Partner, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+partnerColumns+` FROM partners p ORDER BY p.id`)
	if err != nil {
		return nil, fmt.Errorf("list partners: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partner, error) { return scanPartner(r) })
	if err != nil {
		return nil, fmt.Errorf("list partners: %w", err)
	}
	return ps, nil
}

// PartnerKey is one SSH public key a partner may log in with.
type PartnerKey struct {
	ID          int64
	PartnerID   string
	Fingerprint string // SHA256:...
	PublicKey   string // authorized_keys line
	Comment     string
	CreatedAt   time.Time
}

// AddPartnerKey registers a public key for a partner. Adding a key that is
// already active is not an error; adding a revoked one reactivates it.
func (s *Store) AddPartnerKey(ctx context.Context, k PartnerKey) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO partner_keys (partner_id, fingerprint, public_key, comment)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (partner_id, fingerprint) DO UPDATE SET revoked_at = NULL`,
		k.PartnerID, k.Fingerprint, k.PublicKey, k.Comment)
	if err != nil {
		return fmt.Errorf("add key for partner %q: %w", k.PartnerID, err)
	}
	return nil
}

// RevokePartnerKey stops a key from logging in, from the next login on.
func (s *Store) RevokePartnerKey(ctx context.Context, partner, fingerprint string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE partner_keys SET revoked_at = now()
		WHERE partner_id = $1 AND fingerprint = $2 AND revoked_at IS NULL`, partner, fingerprint)
	if err != nil {
		return fmt.Errorf("revoke key for partner %q: %w", partner, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("key %s of partner %q: %w", fingerprint, partner, ErrNotFound)
	}
	return nil
}

// KeyAllowed reports whether partner may log in with the key of this fingerprint.
// It is asked at every login, so keys are added and revoked without a restart.
func (s *Store) KeyAllowed(ctx context.Context, partner, fingerprint string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM partner_keys
		WHERE partner_id = $1 AND fingerprint = $2 AND revoked_at IS NULL)`, partner, fingerprint).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check key of partner %q: %w", partner, err)
	}
	return ok, nil
}
