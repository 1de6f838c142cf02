package apply

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// DeliverWebhook claims a delivery by its webhook-id, insert-or-nothing, and
// in the same transaction applies its change under the partner lock and
// stores the answer answer gives. A concurrent duplicate waits on the
// claim's primary key and then replays the stored response; if the first
// attempt rolled back, the duplicate claims it instead.
//
// The change is applied only when its version is above the highest version
// accepted for its entity; otherwise it is stale (code superseded). Against
// the records it is classified as a CSV row is: created, unchanged, held
// (record_locked or period_locked, with an exception for a reviewer) or
// updated (the previous version kept in record_history, replaced_by
// "webhook ID").
func (e *Engine) DeliverWebhook(ctx context.Context, d records.WebhookDelivery, answer records.WebhookAnswerFunc) (records.WebhookAnswer, error) {
	var ans records.WebhookAnswer
	err := pgx.BeginFunc(ctx, e.store.Pool(), func(tx pgx.Tx) error {
		var claimed bool
		var err error
		if ans, claimed, err = records.ClaimWebhook(ctx, tx, d); err != nil || !claimed {
			return err
		}
		var res records.WebhookResult
		switch {
		case d.Invalid != nil:
			res.Invalid = d.Invalid
			if err := records.QuarantineWebhook(ctx, tx, d, *d.Invalid); err != nil {
				return err
			}
		case d.Change != nil:
			if err := records.PartnerLock(ctx, tx, d.PartnerID); err != nil {
				return err
			}
			if res, err = applyWebhook(ctx, tx, d.PartnerID, d.WebhookID, *d.Change); err != nil {
				return err
			}
		default:
			return fmt.Errorf("webhook %s: neither a change nor a reason to refuse it", d.WebhookID)
		}
		ans.StoredAnswer = answer(res)
		return records.CompleteWebhook(ctx, tx, d, res, ans.StoredAnswer)
	})
	if err != nil {
		return records.WebhookAnswer{}, fmt.Errorf("deliver webhook %s: %w", d.WebhookID, err)
	}
	return ans, nil
}

// applyWebhook decides and applies one change. The partner lock is held.
func applyWebhook(ctx context.Context, tx pgx.Tx, partner, webhookID string, ch records.WebhookChange) (records.WebhookResult, error) {
	r := ch.Row
	res := records.WebhookResult{EntityID: ch.EntityID, Version: ch.Version}
	stored, err := records.WebhookEntityVersion(ctx, tx, partner, ch.EntityID)
	if err != nil {
		return res, err
	}
	if stored != nil && ch.Version <= *stored {
		res.Outcome, res.Code = records.OutcomeStale, normalize.CodeSuperseded
		res.Message = fmt.Sprintf("version %d of entity %s is not above version %d already received, so this change was not applied",
			ch.Version, ch.EntityID, *stored)
		return res, nil
	}

	// The change goes through the same classification and statements as a
	// file's rows (classify.go), as a one-row stage with no line.
	r.Row, r.Line = 0, 0
	args := pgx.NamedArgs{"partner": partner, "seq": nil, "env": nil, "by": "webhook " + webhookID,
		"file_rejected": false, "held": "the change"}
	if err := stageAndApply(ctx, tx, []*records.StagedRow{&r}, args, false); err != nil {
		return res, err
	}
	if err := classifiedWebhookChange(ctx, tx, partner, &res); err != nil {
		return res, err
	}
	if res.Outcome == records.OutcomeRejected {
		// Nothing was applied or held: the same version may come again once
		// the employee is onboarded.
		return res, nil
	}
	var rec *int64
	if res.RecordID != 0 {
		rec = &res.RecordID
	}
	return res, records.StoreWebhookEntityVersion(ctx, tx, partner, ch.EntityID, ch.Version, rec, webhookID)
}

var sqlClassifiedWebhookChange = query("ClassifiedWebhookChange")

// classifiedWebhookChange reads what classify decided for a webhook's
// one-row stage (the message is classify's, as for a file's row: empty
// when the change was applied) into res.
func classifiedWebhookChange(ctx context.Context, tx pgx.Tx, partner string, res *records.WebhookResult) error {
	var recID *int64
	err := tx.QueryRow(ctx, sqlClassifiedWebhookChange, partner).
		Scan(&res.Outcome, &res.Code, &res.Message, &recID, &res.ExceptionID, &res.EmployeeID)
	if err != nil {
		return fmt.Errorf("read outcome: %w", err)
	}
	if recID != nil {
		res.RecordID = *recID
	}
	if res.Outcome != records.OutcomeHeld {
		res.ExceptionID = 0
	}
	return nil
}
