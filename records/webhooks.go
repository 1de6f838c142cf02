package records

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/payintake/payintake/normalize"
)

// Statements of webhooks.sql.
var (
	sqlClaimWebhookDelivery      = query("ClaimWebhookDelivery")
	sqlWebhookDeliveryAnswer     = query("WebhookDeliveryAnswer")
	sqlCompleteWebhookDelivery   = query("CompleteWebhookDelivery")
	sqlQuarantineWebhook         = query("QuarantineWebhook")
	sqlQuarantinedWebhooks       = query("QuarantinedWebhooks")
	sqlWebhookEntityVersion      = query("WebhookEntityVersion")
	sqlStoreWebhookEntityVersion = query("StoreWebhookEntityVersion")
)

// WebhookChange is one pay-line change pushed by a webhook, already
// normalised: Row carries the normalised values and content hash exactly as
// a CSV row would be staged, so a webhook and a file agree on a record.
type WebhookChange struct {
	EntityID string
	Version  int64
	Row      StagedRow
}

// WebhookDelivery is one signed delivery: exactly one of Change and Invalid is set.
type WebhookDelivery struct {
	PartnerID, WebhookID string
	Body                 []byte // raw, as signed
	Change               *WebhookChange
	// Invalid is why the body was refused (422): the body is quarantined
	// for audit, nothing is applied.
	Invalid *normalize.RowError
}

// WebhookResult is what became of a delivery.
type WebhookResult struct {
	Invalid     *normalize.RowError // set when the body was refused
	EntityID    string
	Version     int64
	Outcome     Outcome        // rejected only for unknown_employee
	Code        normalize.Code // an exception code, CodeSuperseded or CodeUnknownEmployee when rejected, or ""
	Message     string
	RecordID    int64
	ExceptionID int64
	// EmployeeID is the employee's id: the mapped one, or for a held
	// unknown employee the one approval would give; "" when rejected or stale.
	EmployeeID string
}

// WebhookAnswer is the answer to a delivery.
type WebhookAnswer struct {
	StoredAnswer
	// Repeated: a redelivery of a webhook-id already answered; the answer
	// is the first one, verbatim.
	Repeated bool
	// BodyMismatch: the webhook-id was answered before for another body. The
	// body was quarantined; the answer is empty, the caller answers with
	// Refused: the reason kept in quarantine (code webhook_id_reuse), so the
	// record and the answer say the same.
	BodyMismatch bool
	Refused      *normalize.RowError
}

// WebhookAnswerFunc gives the door's answer to what became of a delivery;
// DeliverWebhook calls it inside the delivery's transaction and stores the
// answer there, with the webhook-id (see StoredAnswer).
type WebhookAnswerFunc func(WebhookResult) StoredAnswer

// ClaimWebhook claims delivery d by its webhook-id in tx, insert-or-nothing.
// A concurrent duplicate waits on the claim's primary key; if the first
// attempt rolled back, the duplicate claims it instead. When the webhook-id
// was claimed before, claimed is false and ans is the first answer
// (Replayed) or, for another body, a refusal (BodyMismatch, the body
// quarantined for audit).
func ClaimWebhook(ctx context.Context, tx pgx.Tx, d WebhookDelivery) (ans WebhookAnswer, claimed bool, err error) {
	sum := sha256.Sum256(d.Body)
	var entity *string
	var version *int64
	if d.Change != nil {
		entity, version = &d.Change.EntityID, &d.Change.Version
	}
	err = tx.QueryRow(ctx, sqlClaimWebhookDelivery,
		d.PartnerID, d.WebhookID, sum[:], d.Body, entity, version).Scan(&claimed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return ans, false, fmt.Errorf("claim webhook %s: %w", d.WebhookID, err)
	}
	if claimed {
		return ans, true, nil
	}
	var firstSum []byte
	if err := tx.QueryRow(ctx, sqlWebhookDeliveryAnswer, d.PartnerID, d.WebhookID).
		Scan(&firstSum, &ans.Code, &ans.Format, &ans.Body); err != nil {
		return ans, false, fmt.Errorf("read webhook %s: %w", d.WebhookID, err)
	}
	if bytes.Equal(firstSum, sum[:]) {
		ans.Repeated = true
		return ans, false, nil
	}
	ans.BodyMismatch = true
	ans.Refused = &normalize.RowError{Code: normalize.CodeWebhookIDReuse, Message: fmt.Sprintf(
		"webhook-id %s was already delivered with a different body; nothing was applied and this body was kept for audit: give every new message its own webhook-id", d.WebhookID)}
	return ans, false, QuarantineWebhook(ctx, tx, d, *ans.Refused)
}

// CompleteWebhook stores, in the transaction that claimed d, what became of
// it and the door's answer, replayed verbatim to every redelivery.
func CompleteWebhook(ctx context.Context, tx pgx.Tx, d WebhookDelivery, res WebhookResult, ans StoredAnswer) error {
	outcome, code := res.Outcome, res.Code
	if res.Invalid != nil {
		outcome, code = OutcomeRejected, res.Invalid.Code
	}
	var recID *int64
	if res.RecordID != 0 {
		recID = &res.RecordID
	}
	_, err := tx.Exec(ctx, sqlCompleteWebhookDelivery,
		d.PartnerID, d.WebhookID, outcome, code, recID, ans.Code, ans.Format, ans.Body)
	if err != nil {
		return fmt.Errorf("store answer to webhook %s: %w", d.WebhookID, err)
	}
	return nil
}

// QuarantineWebhook keeps a refused body for audit, with why it was refused.
func QuarantineWebhook(ctx context.Context, tx pgx.Tx, d WebhookDelivery, why normalize.RowError) error {
	_, err := tx.Exec(ctx, sqlQuarantineWebhook, d.PartnerID, d.WebhookID, d.Body, string(why.Code), why.Field, why.Message)
	if err != nil {
		return fmt.Errorf("quarantine webhook %s: %w", d.WebhookID, err)
	}
	return nil
}

// QuarantinedWebhook is a refused webhook body, kept for audit.
type QuarantinedWebhook struct {
	ID                   int64
	PartnerID, WebhookID string
	Body                 []byte
	Code, Field, Message string
}

// QuarantinedWebhooks lists the refused webhook bodies of partner in arrival order.
func (s *Store) QuarantinedWebhooks(ctx context.Context, partner string) ([]QuarantinedWebhook, error) {
	rows, err := s.pool.Query(ctx, sqlQuarantinedWebhooks, partner)
	if err != nil {
		return nil, fmt.Errorf("list quarantined webhooks: %w", err)
	}
	qs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QuarantinedWebhook, error) {
		var q QuarantinedWebhook
		err := r.Scan(&q.ID, &q.PartnerID, &q.WebhookID, &q.Body, &q.Code, &q.Field, &q.Message)
		return q, err
	})
	if err != nil {
		return nil, fmt.Errorf("list quarantined webhooks: %w", err)
	}
	return qs, nil
}

// WebhookEntityVersion is the highest version of entity accepted from
// partner, nil when none was.
func WebhookEntityVersion(ctx context.Context, tx pgx.Tx, partner, entity string) (*int64, error) {
	var stored *int64
	err := tx.QueryRow(ctx, sqlWebhookEntityVersion, partner, entity).Scan(&stored)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read version of entity %s: %w", entity, err)
	}
	return stored, nil
}

// StoreWebhookEntityVersion records version as entity's latest accepted,
// with the record it wrote (nil: none).
func StoreWebhookEntityVersion(ctx context.Context, tx pgx.Tx, partner, entity string, version int64, rec *int64, webhookID string) error {
	if _, err := tx.Exec(ctx, sqlStoreWebhookEntityVersion, partner, entity, version, rec, webhookID); err != nil {
		return fmt.Errorf("store version of entity %s: %w", entity, err)
	}
	return nil
}
