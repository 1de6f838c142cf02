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
	sqlClassifyWebhookChange     = query("ClassifyWebhookChange")
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

// DeliverWebhook claims a delivery by its webhook-id, insert-or-nothing, and
// in the same transaction applies its change under the partner lock and
// stores the answer answer gives. A concurrent duplicate waits on the
// claim's primary key and then gives the stored response again; if the first
// attempt rolled back, the duplicate claims it instead.
//
// The change is applied only when its version is above the highest version
// accepted for its entity; otherwise it is stale (code superseded). Against
// the records it is classified as a CSV row is: created, unchanged, held
// (record_locked or period_locked, with an exception for a reviewer) or
// updated (the previous version kept in record_history, replaced_by
// "webhook ID").
func (s *Store) DeliverWebhook(ctx context.Context, d WebhookDelivery, answer WebhookAnswerFunc) (WebhookAnswer, error) {
	var ans WebhookAnswer
	sum := sha256.Sum256(d.Body)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ans = WebhookAnswer{}
		var entity *string
		var version *int64
		if d.Change != nil {
			entity, version = &d.Change.EntityID, &d.Change.Version
		}
		var claimed bool
		err := tx.QueryRow(ctx, sqlClaimWebhookDelivery,
			d.PartnerID, d.WebhookID, sum[:], d.Body, entity, version).Scan(&claimed)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("claim webhook %s: %w", d.WebhookID, err)
		}
		if !claimed {
			var firstSum []byte
			if err := tx.QueryRow(ctx, sqlWebhookDeliveryAnswer, d.PartnerID, d.WebhookID).
				Scan(&firstSum, &ans.Code, &ans.Format, &ans.Body); err != nil {
				return fmt.Errorf("read webhook %s: %w", d.WebhookID, err)
			}
			if bytes.Equal(firstSum, sum[:]) {
				ans.Repeated = true
				return nil
			}
			ans.BodyMismatch = true
			ans.Refused = &normalize.RowError{Code: normalize.CodeWebhookIDReuse, Message: fmt.Sprintf(
				"webhook-id %s was already delivered with a different body; nothing was applied and this body was kept for audit: give every new message its own webhook-id", d.WebhookID)}
			return quarantine(ctx, tx, d, *ans.Refused)
		}
		var res WebhookResult
		switch {
		case d.Invalid != nil:
			res.Invalid = d.Invalid
			if err := quarantine(ctx, tx, d, *d.Invalid); err != nil {
				return err
			}
		case d.Change != nil:
			if err := partnerLock(ctx, tx, d.PartnerID); err != nil {
				return err
			}
			if res, err = s.applyWebhook(ctx, tx, d.PartnerID, d.WebhookID, *d.Change); err != nil {
				return err
			}
		default:
			return fmt.Errorf("webhook %s: neither a change nor a reason to refuse it", d.WebhookID)
		}
		ans.StoredAnswer = answer(res)
		outcome, code := res.Outcome, res.Code
		if res.Invalid != nil {
			outcome, code = OutcomeRejected, res.Invalid.Code
		}
		var recID *int64
		if res.RecordID != 0 {
			recID = &res.RecordID
		}
		_, err = tx.Exec(ctx, sqlCompleteWebhookDelivery,
			d.PartnerID, d.WebhookID, outcome, code, recID, ans.Code, ans.Format, ans.Body)
		if err != nil {
			return fmt.Errorf("store answer to webhook %s: %w", d.WebhookID, err)
		}
		return nil
	})
	if err != nil {
		return WebhookAnswer{}, fmt.Errorf("deliver webhook %s: %w", d.WebhookID, err)
	}
	return ans, nil
}

func quarantine(ctx context.Context, tx pgx.Tx, d WebhookDelivery, why normalize.RowError) error {
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

// applyWebhook decides and applies one change. The partner lock is held.
func (s *Store) applyWebhook(ctx context.Context, tx pgx.Tx, partner, webhookID string, ch WebhookChange) (WebhookResult, error) {
	r := ch.Row
	res := WebhookResult{EntityID: ch.EntityID, Version: ch.Version}
	var stored *int64
	err := tx.QueryRow(ctx, sqlWebhookEntityVersion,
		partner, ch.EntityID).Scan(&stored)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return res, fmt.Errorf("read version of entity %s: %w", ch.EntityID, err)
	}
	if stored != nil && ch.Version <= *stored {
		res.Outcome, res.Code = OutcomeStale, normalize.CodeSuperseded
		res.Message = fmt.Sprintf("version %d of entity %s is not above version %d already received, so this change was not applied",
			ch.Version, ch.EntityID, *stored)
		return res, nil
	}

	// The change goes through the same classification and statements as a
	// file's rows (classify.go), as a one-row stage with no line.
	if _, err := tx.Exec(ctx, stageDDL); err != nil {
		return res, fmt.Errorf("create stage: %w", err)
	}
	r.Row, r.Line = 0, 0
	if err := copyText(ctx, tx.Conn(), "stage", stageColumns, bytes.NewReader(appendStageRow(nil, &r, keyHash(&r), nil))); err != nil {
		return res, fmt.Errorf("stage change: %w", err)
	}
	args := pgx.NamedArgs{"partner": partner, "seq": nil, "env": nil, "by": "webhook " + webhookID,
		"file_rejected": false, "header": ResultHeader, "held": "the change"}
	if _, err := classifyAndApply(ctx, tx, args, false, false); err != nil {
		return res, err
	}
	var recID *int64
	// The message is classify's, as for a file's row (empty when the change
	// was applied).
	err = tx.QueryRow(ctx, sqlClassifyWebhookChange, partner).
		Scan(&res.Outcome, &res.Code, &res.Message, &recID, &res.ExceptionID, &res.EmployeeID)
	if err != nil {
		return res, fmt.Errorf("read outcome: %w", err)
	}
	if recID != nil {
		res.RecordID = *recID
	}
	if res.Outcome != OutcomeHeld {
		res.ExceptionID = 0
	}
	if res.Outcome == OutcomeRejected {
		// Nothing was applied or held: the same version may come again once
		// the employee is onboarded.
		return res, nil
	}

	var rec *int64
	if res.RecordID != 0 {
		rec = &res.RecordID
	}
	if _, err := tx.Exec(ctx, sqlStoreWebhookEntityVersion,
		partner, ch.EntityID, ch.Version, rec, webhookID); err != nil {
		return res, fmt.Errorf("store version of entity %s: %w", ch.EntityID, err)
	}
	return res, nil
}
