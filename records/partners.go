package records

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statements of partners.sql.
var (
	sqlPartner                    = query("Partner")
	sqlPartners                   = query("Partners")
	sqlAddPartner                 = query("AddPartner")
	sqlCreatePartner              = query("CreatePartner")
	sqlPartnerExists              = query("PartnerExists")
	sqlRevokePartnerKeysNotListed = query("RevokePartnerKeysNotListed")
	sqlPartnerAllowsFrom          = query("PartnerAllowsFrom")
)

// Mode says how a partner's files are applied.
const (
	ModeRow          = "row"            // each valid row is applied on its own
	ModeAllOrNothing = "all-or-nothing" // one rejected row rejects the whole file
)

// Partner is one sender of payroll files and its file conventions.
type Partner struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Delimiter    string `json:"delimiter"` // "" means detect
	DecimalComma bool   `json:"decimal_comma"`
	DateFormat   string `json:"date_format"`
	Currency     string `json:"currency"`
	FilePattern  string `json:"file_pattern"`
	Mode         string `json:"mode"`
	// UnknownEmployee says what a row whose employee_ref has no mapping
	// gets: UnknownCreate, UnknownReject or UnknownHold.
	UnknownEmployee string `json:"unknown_employee"`
	// Target names the payroll vendor its approved periods are dispatched
	// to ("" none; see package dispatch).
	Target string `json:"target"`
	// NotifyURL receives the partner's result notifications ("" none;
	// see package notify).
	NotifyURL string `json:"notify_url"`
	// PGP is the partner's OpenPGP policy: PGPOff, PGPAccept or PGPRequire.
	PGP string `json:"pgp"`
	// AllowFrom are the client addresses the partner's credentials work
	// from (empty: anywhere; see PartnerAllowsFrom).
	AllowFrom []netip.Prefix `json:"allow_from"`
	CreatedAt time.Time      `json:"created_at"`
	Keys      int            `json:"keys"` // active SSH keys
	// Profile is the latest version of the partner's profile (nil: none):
	// how its files' headers and codes map onto payintake's.
	Profile *PartnerProfile `json:"profile,omitempty"`
}

// What a row whose employee_ref has no employee mapping gets (a partner's
// --unknown-employee).
const (
	UnknownCreate = "create" // the mapping is stored with the derived id, the row applied
	UnknownReject = "reject" // the row is rejected (code unknown_employee)
	UnknownHold   = "hold"   // the row is held for a reviewer (code unknown_employee)
)

// ErrExists is returned when a partner or key is added twice.
var ErrExists = errors.New("already exists")

// AddPartner creates a partner. It returns ErrExists if the ID is taken.
func (s *Store) AddPartner(ctx context.Context, p Partner) error {
	if p.Mode == "" {
		p.Mode = ModeRow
	}
	if p.UnknownEmployee == "" {
		p.UnknownEmployee = UnknownCreate
	}
	_, err := s.pool.Exec(ctx, sqlAddPartner,
		p.ID, p.Name, p.Delimiter, p.DecimalComma, p.DateFormat, p.Currency, p.FilePattern, p.Mode, p.UnknownEmployee)
	return addPartnerErr(p.ID, err)
}

func addPartnerErr(id string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return fmt.Errorf("partner %q: %w", id, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("add partner %q: %w", id, err)
	}
	return nil
}

// PartnerUpdate is a change of a partner's settings: a nil field is left
// as it is. A new setting is one field here and one line in its columns.
type PartnerUpdate struct {
	Name            *string
	Delimiter       *string
	DecimalComma    *bool
	DateFormat      *string
	Currency        *string
	FilePattern     *string
	Mode            *string
	UnknownEmployee *string
	// Target, when not nil, becomes the dispatch target ("" for none).
	Target *string
	// NotifyURL, when not nil, becomes the notify URL ("" for none).
	NotifyURL *string
	// AllowFrom, when not nil, becomes the partner's allowed client
	// addresses (empty: anywhere).
	AllowFrom *[]netip.Prefix
	// AuthorizedKeys, when not nil, become the partner's active SSH keys:
	// keys not in it are revoked, the others added or reactivated.
	AuthorizedKeys *[]PartnerKey
	// PGP, when not nil, becomes the OpenPGP policy (PGPOff, …).
	PGP *string
	// PGPKeys, when not nil, become the partner's current OpenPGP public
	// keys (the first is the one results are encrypted to); the others are
	// kept as replaced.
	PGPKeys *[]PartnerPGPKey
}

// Apply gives p with the file settings u sets (delimiter, decimal comma,
// date format, currency, file pattern, mode, unknown employee), unstored:
// a preview reads a sample as if they were set.
func (u PartnerUpdate) Apply(p Partner) Partner {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.Delimiter, u.Delimiter)
	set(&p.DateFormat, u.DateFormat)
	set(&p.Currency, u.Currency)
	set(&p.FilePattern, u.FilePattern)
	set(&p.Mode, u.Mode)
	set(&p.UnknownEmployee, u.UnknownEmployee)
	if u.DecimalComma != nil {
		p.DecimalComma = *u.DecimalComma
	}
	return p
}

// columns gives the partners columns u sets, with their values.
func (u PartnerUpdate) columns() (cols []string, vals []any) {
	add := func(col string, set bool, v any) {
		if set {
			cols = append(cols, col)
			vals = append(vals, v)
		}
	}
	add("name", u.Name != nil, u.Name)
	add("delimiter", u.Delimiter != nil, u.Delimiter)
	add("decimal_comma", u.DecimalComma != nil, u.DecimalComma)
	add("date_format", u.DateFormat != nil, u.DateFormat)
	add("currency", u.Currency != nil, u.Currency)
	add("file_pattern", u.FilePattern != nil, u.FilePattern)
	add("mode", u.Mode != nil, u.Mode)
	add("unknown_employee", u.UnknownEmployee != nil, u.UnknownEmployee)
	add("pgp", u.PGP != nil, u.PGP)
	if u.AllowFrom != nil {
		add("allow_from", true, *u.AllowFrom)
	}
	if u.Target != nil && *u.Target == "" {
		add("dispatch_target", true, nil)
	} else {
		add("dispatch_target", u.Target != nil, u.Target)
	}
	if u.NotifyURL != nil && *u.NotifyURL == "" {
		add("notify_url", true, nil)
	} else {
		add("notify_url", u.NotifyURL != nil, u.NotifyURL)
	}
	return cols, vals
}

// CreatePartner adds partner id with the settings of u (the others keep
// their defaults), in one transaction. It returns ErrExists if the ID is taken.
func (s *Store) CreatePartner(ctx context.Context, id string, u PartnerUpdate) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlCreatePartner, id); err != nil {
			return addPartnerErr(id, err)
		}
		return updatePartner(ctx, tx, id, u)
	})
}

// UpdatePartner changes the settings of partner id that u sets, in one
// transaction; the others are left unchanged. It returns ErrNotFound for an
// unknown partner. Files being processed keep the settings they started
// with; the next file reads the new ones.
func (s *Store) UpdatePartner(ctx context.Context, id string, u PartnerUpdate) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var found bool
		if err := tx.QueryRow(ctx, sqlPartnerExists, id).Scan(&found); err != nil {
			return fmt.Errorf("read partner %q: %w", id, err)
		}
		if !found {
			return fmt.Errorf("partner %q: %w", id, ErrNotFound)
		}
		return updatePartner(ctx, tx, id, u)
	})
}

func updatePartner(ctx context.Context, tx pgx.Tx, id string, u PartnerUpdate) error {
	cols, vals := u.columns()
	if len(cols) > 0 {
		set := make([]string, len(cols))
		for i, c := range cols {
			set[i] = fmt.Sprintf("%s = $%d", c, i+2)
		}
		q := `UPDATE partners SET ` + strings.Join(set, ", ") + ` WHERE id = $1`
		if _, err := tx.Exec(ctx, q, append([]any{id}, vals...)...); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.ConstraintName == "partners_dispatch_target_fkey" {
				return fmt.Errorf("partner %q: no target named %q: add it first with `payintake target add`", id, *u.Target)
			}
			return fmt.Errorf("change partner %q: %w", id, err)
		}
	}
	if u.PGPKeys != nil {
		if err := setPartnerPGPKeys(ctx, tx, id, *u.PGPKeys); err != nil {
			return err
		}
	}
	if err := checkWorkbookResults(ctx, tx, id); err != nil {
		return err
	}
	if u.AuthorizedKeys == nil {
		return nil
	}
	fps := make([]string, 0, len(*u.AuthorizedKeys))
	for _, k := range *u.AuthorizedKeys {
		if _, err := tx.Exec(ctx, sqlAddPartnerKey, id, k.Fingerprint, k.PublicKey, k.Comment); err != nil {
			return fmt.Errorf("add key for partner %q: %w", id, err)
		}
		fps = append(fps, k.Fingerprint)
	}
	if _, err := tx.Exec(ctx, sqlRevokePartnerKeysNotListed, id, fps); err != nil {
		return fmt.Errorf("revoke keys of partner %q: %w", id, err)
	}
	return nil
}

const partnerColumns = `p.id, p.name, p.delimiter, p.decimal_comma, p.date_format, p.currency, p.file_pattern, p.mode, p.unknown_employee, coalesce(p.dispatch_target, ''), coalesce(p.notify_url, ''), p.allow_from, p.pgp, p.created_at,
	(SELECT count(*) FROM partner_keys k WHERE k.partner_id = p.id AND k.revoked_at IS NULL),
	(SELECT ` + profileJSON + ` || jsonb_build_object('decided', (SELECT jsonb_object_agg(cc.code, cc.component)
		FROM component_codes cc WHERE cc.partner_id = p.id))
	FROM partner_profiles pp WHERE pp.partner_id = p.id ORDER BY pp.version DESC LIMIT 1)`

func scanPartner(row pgx.Row) (Partner, error) {
	var p Partner
	err := row.Scan(&p.ID, &p.Name, &p.Delimiter, &p.DecimalComma, &p.DateFormat, &p.Currency, &p.FilePattern, &p.Mode, &p.UnknownEmployee, &p.Target, &p.NotifyURL, &p.AllowFrom, &p.PGP, &p.CreatedAt, &p.Keys, &p.Profile)
	return p, err
}

// Partner returns one partner, or ErrNotFound.
func (s *Store) Partner(ctx context.Context, id string) (Partner, error) {
	p, err := scanPartner(s.pool.QueryRow(ctx, sqlPartner, id))
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
	rows, err := s.pool.Query(ctx, sqlPartners)
	if err != nil {
		return nil, fmt.Errorf("list partners: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partner, error) { return scanPartner(r) })
	if err != nil {
		return nil, fmt.Errorf("list partners: %w", err)
	}
	return ps, nil
}

// partnerIDRule is the rule for partner ids; the partners table's CHECK
// holds the same (TestPartnerIDRuleParity runs both).
var partnerIDRule = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ValidPartnerID tells whether id can name a partner. A door that receives
// an id from outside (an SSH user name) checks it first, so that malformed
// input is answered as an unknown partner, never sent to the database.
func ValidPartnerID(id string) bool { return partnerIDRule.MatchString(id) }

// PartnerAllowsFrom reports whether partner's credentials may be used from
// the client address addr (its AllowFrom is empty, or holds addr), and
// gives its AllowFrom, for the refusal's log. It returns ErrNotFound for an
// unknown partner. Every door asks it once it knows the partner: SFTP
// after the key is proven, HTTP after the token or signature is checked.
func (s *Store) PartnerAllowsFrom(ctx context.Context, partner string, addr netip.Addr) (bool, []netip.Prefix, error) {
	var ok bool
	var nets []netip.Prefix
	err := s.pool.QueryRow(ctx, sqlPartnerAllowsFrom, partner, addr.Unmap()).Scan(&ok, &nets)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil, fmt.Errorf("partner %q: %w", partner, ErrNotFound)
	}
	if err != nil {
		return false, nil, fmt.Errorf("read the addresses partner %q may connect from: %w", partner, err)
	}
	return ok, nets, nil
}
