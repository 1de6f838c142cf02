package intake_test

import (
	"errors"
	"testing"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// A webhook body the normaliser refuses is quarantined with the
// normaliser's own *RowError (no copy of it): its code is a sentinel.
func TestDeliverWebhookKeepsTheRowError(t *testing.T) {
	f := newFixture(t, records.Partner{})
	var got records.WebhookResult
	body := `{"entity_id":"e1","version":1,"employee_ref":"E1","pay_period":"2026-11","component":"BASE","amount":"12.345","currency":"USD"}`
	_, err := f.in.DeliverWebhook(f.ctx, intake.Webhook{Partner: f.partner, ID: "msg-1", Body: []byte(body)},
		func(res records.WebhookResult) records.StoredAnswer {
			got = res
			return records.StoredAnswer{Code: 422, Format: "text/plain", Body: []byte("refused")}
		})
	if err != nil {
		t.Fatal(err)
	}
	if got.Invalid == nil || !errors.Is(got.Invalid, normalize.CodeTooManyDecimals) || got.Invalid.Field != normalize.FieldAmount {
		t.Fatalf("invalid %+v, want too_many_decimals on amount", got.Invalid)
	}
	q, err := f.store.QuarantinedWebhooks(f.ctx, f.partner)
	if err != nil || len(q) != 1 || q[0].Code != string(normalize.CodeTooManyDecimals) || q[0].Message != got.Invalid.Message {
		t.Fatalf("quarantined %+v (%v)", q, err)
	}
}
