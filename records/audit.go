package records

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statements of audit.sql.
var (
	sqlAudit    = query("Audit")
	sqlAuditLog = query("AuditLog")
)

// Where a reviewer (or a partner) acted from, kept in the audit trail.
const (
	ViaCLI     = "cli"
	ViaAPI     = "api"
	ViaConsole = "console"
	// A partner's refused login or request, by the door it came through.
	ViaSFTP    = "sftp"
	ViaHTTP    = "http"
	ViaWebhook = "webhook"
)

// AuditEntry is one line of the review audit trail.
type AuditEntry struct {
	ID          int64     `json:"id"`
	At          time.Time `json:"at"`
	Actor       string    `json:"actor"`
	Via         string    `json:"via"`
	Action      string    `json:"action"` // approve, reject, login, login_failed, logout, token, denied, reviewer_add, address_refused
	ExceptionID int64     `json:"exception_id,omitempty"`
	PartnerID   string    `json:"partner,omitempty"`
	Detail      string    `json:"detail,omitempty"`
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func audit(ctx context.Context, db execer, e AuditEntry) error {
	var xid any
	if e.ExceptionID != 0 {
		xid = e.ExceptionID
	}
	_, err := db.Exec(ctx, sqlAudit, e.Actor, e.Via, e.Action, xid, e.PartnerID, e.Detail)
	if err != nil {
		return fmt.Errorf("write the review audit: %w", err)
	}
	return nil
}

// Audit records an event that has no effect of its own (a login, a refusal).
func (s *Store) Audit(ctx context.Context, e AuditEntry) error { return audit(ctx, s.pool, e) }

// AuditLog lists the audit trail, newest first; exceptionID 0 means all.
func (s *Store) AuditLog(ctx context.Context, exceptionID int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, sqlAuditLog, exceptionID, limit)
	if err != nil {
		return nil, fmt.Errorf("read the review audit: %w", err)
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.ID, &e.At, &e.Actor, &e.Via, &e.Action, &e.ExceptionID, &e.PartnerID, &e.Detail)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the review audit: %w", err)
	}
	return es, nil
}
