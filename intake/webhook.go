package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/internal/strictjson"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// Webhook is one webhook delivery whose signature the door has checked: a
// JSON body with one pay-line change.
type Webhook struct {
	Partner string
	ID      string // the webhook-id: a redelivery repeats it
	Body    []byte // raw, as signed
}

// WebhookResult is what became of a delivery; a WebhookAnswerFunc gives
// the door's answer to it, stored in the delivery's transaction;
// WebhookAnswer is the answer given (the first one again for a redelivery).
type (
	WebhookResult     = records.WebhookResult
	WebhookAnswerFunc = records.WebhookAnswerFunc
	WebhookAnswer     = records.WebhookAnswer
)

// DeliverWebhook is the one entry point of a webhook change: the body is
// read (parseWebhook), its values normalised exactly as a CSV row with the
// partner's settings, and the change applied if its per-entity version is
// new (records.Store.DeliverWebhook, which keeps the answer the door's
// answer func gives, for a redelivery). An invalid body is quarantined,
// nothing applied.
func (in *Intake) DeliverWebhook(ctx context.Context, w Webhook, answer WebhookAnswerFunc) (WebhookAnswer, error) {
	p, err := in.Store.Partner(ctx, w.Partner)
	if err != nil {
		return records.WebhookAnswer{}, fmt.Errorf("read partner: %w", err)
	}
	d := records.WebhookDelivery{PartnerID: w.Partner, WebhookID: w.ID, Body: w.Body}
	d.Change, d.Invalid = parseWebhook(w.Body, Settings(p))
	ans, err := in.Engine.DeliverWebhook(ctx, d, answer)
	if err != nil {
		return ans, fmt.Errorf("deliver webhook: %w", err)
	}
	return ans, nil
}

// maxReplayLegs bounds the legs of one replay request.
const maxReplayLegs = 10000

// LegReplay is a request to replay rows (legs) of a processed submission
// (POST /v1/submissions/{id}/replays): a JSON body {"rows": [...]}.
type LegReplay struct {
	Of     records.Envelope // the submission's outcome envelope
	Key    string           // the request's idempotency key
	Source string
	Body   []byte
}

// ReplayResult is what a leg replay did; a ReplayAnswerFunc gives the
// door's answer to it, stored in the replay's transaction; ReplayAnswer is
// the answer given (the first one again for a repeat).
type (
	ReplayResult     = records.ReplayResult
	ReplayAnswerFunc = records.ReplayAnswerFunc
	ReplayAnswer     = records.ReplayAnswer
)

// NotReplayableError refuses a replay naming rows that may not be
// replayed; nothing was applied.
type NotReplayableError = records.NotReplayableError

// ErrReplayKeyReuse: the replay's idempotency key was used for another body.
var ErrReplayKeyReuse = records.ErrReplayKeyReuse

// ReplayLegs is the one entry point of a leg replay by request: the body
// is read (parseReplay), each leg normalised as a CSV row with the
// partner's settings, and the legs replayed (records.Store.Replay). A body
// that is not a replay is refused whole: the *normalize.RowError says
// why (its code, field and message, as for a webhook body), nothing applied.
func (in *Intake) ReplayLegs(ctx context.Context, r LegReplay, answer ReplayAnswerFunc) (ReplayAnswer, *normalize.RowError, error) {
	p, err := in.Store.Partner(ctx, r.Of.PartnerID)
	if err != nil {
		return records.ReplayAnswer{}, nil, fmt.Errorf("read partner: %w", err)
	}
	legs, bad := parseReplay(r.Body, Settings(p))
	if bad != nil {
		return records.ReplayAnswer{}, bad, nil
	}
	ans, err := in.Engine.Replay(ctx, records.ReplayRequest{PartnerID: r.Of.PartnerID, Of: r.Of,
		Key: records.SubmissionKey(r.Key), Source: r.Source, Body: r.Body, Legs: legs}, answer)
	return ans, nil, err
}

// payLine is a pay line's members in a webhook or a replayed leg, each
// kept as its JSON text: money must be a JSON string and is never
// converted from a number, so the type is read before the value. Its tags
// are normalize.FieldNames (TestPayLineMembersAreFieldNames).
type payLine struct {
	EmployeeRef jsontext.Value `json:"employee_ref"`
	PayPeriod   jsontext.Value `json:"pay_period"`
	Component   jsontext.Value `json:"component"`
	Amount      jsontext.Value `json:"amount"`
	Currency    jsontext.Value `json:"currency"`
	Hours       jsontext.Value `json:"hours"`
	Rate        jsontext.Value `json:"rate"`
	PayDate     jsontext.Value `json:"pay_date"`
}

// webhookBody is a webhook's one pay-line change.
type webhookBody struct {
	EntityID jsontext.Value `json:"entity_id"`
	Version  jsontext.Value `json:"version"`
	payLine
}

// replayBody is a leg replay: the corrected rows of a submission.
type replayBody struct {
	Rows []struct {
		Row jsontext.Value `json:"row"`
		payLine
	} `json:"rows"`
}

// refusedJSON is the row error of a body strictjson refused: the member in
// Field, the reason as its code.
func refusedJSON(err error) *normalize.RowError {
	var se *strictjson.Error
	if !errors.As(err, &se) {
		return &normalize.RowError{Code: normalize.CodeInvalidJSON, Message: err.Error()}
	}
	code := normalize.CodeInvalidJSON
	switch {
	case errors.Is(err, strictjson.ErrDuplicate):
		code = normalize.CodeDuplicateMember
	case errors.Is(err, strictjson.ErrUnknown):
		code = normalize.CodeUnknownMember
	}
	return &normalize.RowError{Code: code, Field: se.Member, Message: se.Error()}
}

// parseWebhook reads a webhook body: a JSON object with entity_id (string),
// version (integer number), and the pay-line fields as JSON strings
// (employee_ref, pay_period, component, amount, currency, and optional
// hours, rate, pay_date). Money must be a string: a JSON number is refused,
// never converted. hours may also be a JSON number, taken as its literal
// text (no floating point). null is absent; the body is read by strictjson
// (a member repeated, in any case, or unknown is refused).
// The values are then normalised exactly as a CSV row with the partner's
// settings.
func parseWebhook(body []byte, s normalize.Settings) (*records.WebhookChange, *normalize.RowError) {
	invalid := func(code normalize.Code, field, msg string) (*records.WebhookChange, *normalize.RowError) {
		return nil, &normalize.RowError{Code: code, Field: field, Message: msg}
	}
	var doc webhookBody
	if err := strictjson.Unmarshal(body, &doc); err != nil {
		return nil, refusedJSON(err)
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return invalid(normalize.CodeInvalidJSON, "", "the body is not a JSON object")
	}
	entity, bad := jsonText(doc.EntityID, "entity_id", false, false)
	if bad != nil {
		return nil, bad
	}
	raw, bad := jsonRawRow(doc.payLine)
	if bad != nil {
		return nil, bad
	}
	entity = strings.TrimSpace(entity)
	if entity == "" {
		return invalid(normalize.CodeMissingValue, "entity_id", "entity_id is missing; send the sender's id of this pay line")
	}
	if len(entity) > 255 {
		return invalid(normalize.CodeInvalidEntityID, "entity_id", "entity_id is longer than 255 bytes")
	}
	var version int64
	switch v := bytes.TrimSpace(doc.Version); {
	case len(v) == 0 || string(v) == "null":
		return invalid(normalize.CodeMissingValue, "version", "version is missing; send the pay line's version as an integer that grows with every change")
	default:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 {
			return invalid(normalize.CodeInvalidVersion, "version", fmt.Sprintf("version is %s; it must be a non-negative JSON integer such as 3", v))
		}
		version = n
	}
	rec, disp, rowErr := normalize.Normalize(raw, s)
	if rowErr != nil {
		return nil, rowErr
	}
	st := apply.Stage(normalize.Row{Line: 0, Index: 1, Record: rec, Display: disp})
	return &records.WebhookChange{EntityID: entity, Version: version, Row: st}, nil
}

// parseReplay reads {"rows": [{"row": N, ...fields}]}: each leg's fields
// are read as a webhook's (money a JSON string, never a number) and
// normalised as a CSV row with the partner's settings. A leg whose values
// are invalid is staged as a rejected row (it gets its outcome); a body
// that is not this shape, or money as a JSON number, is refused whole.
func parseReplay(body []byte, s normalize.Settings) ([]records.Leg, *normalize.RowError) {
	bad := func(code normalize.Code, field, detail string) ([]records.Leg, *normalize.RowError) {
		return nil, &normalize.RowError{Code: code, Field: field, Message: detail + "; nothing was applied"}
	}
	var doc replayBody
	if err := strictjson.Unmarshal(body, &doc); err != nil {
		r := refusedJSON(err)
		if r.Code == normalize.CodeInvalidJSON {
			return bad(normalize.CodeInvalidJSON, r.Field, r.Message+`: send a JSON object {"rows": [{"row": N, "employee_ref": ..., "amount": "12.50", ...}]}`)
		}
		return bad(r.Code, r.Field, r.Message)
	}
	if len(doc.Rows) == 0 || len(doc.Rows) > maxReplayLegs {
		return bad(normalize.CodeInvalidRows, "rows", fmt.Sprintf("rows must list 1 to %d corrected rows", maxReplayLegs))
	}
	legs := make([]records.Leg, 0, len(doc.Rows))
	for i, m := range doc.Rows {
		at := fmt.Sprintf("rows[%d]", i)
		n, err := strconv.Atoi(string(bytes.TrimSpace(m.Row)))
		if err != nil || n < 1 {
			return bad(normalize.CodeInvalidRow, at+".row", at+".row must be the row index (a JSON integer from 1) of the submission's row this corrects")
		}
		raw, invalid := jsonRawRow(m.payLine)
		if invalid != nil {
			return bad(invalid.Code, at+"."+invalid.Field, at+": "+invalid.Message)
		}
		rec, disp, rowErr := normalize.Normalize(raw, s)
		row := normalize.Row{Index: n, Record: rec, Display: disp}
		if rowErr != nil {
			row.Err = rowErr
		}
		legs = append(legs, records.Leg{Row: n, Staged: apply.Stage(row)})
	}
	return legs, nil
}

// jsonText reads a member (raw, its JSON text) that must be a JSON string,
// or with number also a JSON number. Money (money true) as a JSON number is
// refused (money_not_string): it is never converted, to avoid rounding.
// Absent and null are "". Webhooks and leg replays share it.
func jsonText(raw jsontext.Value, field string, money, number bool) (string, *normalize.RowError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch c := raw[0]; {
	case c == '"':
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", &normalize.RowError{Code: normalize.CodeInvalidJSON, Field: field, Message: field + " is not a valid JSON string"}
		}
		return v, nil
	case c == '-' || (c >= '0' && c <= '9'):
		if number {
			return string(raw), nil
		}
		if money {
			return "", &normalize.RowError{Code: normalize.CodeMoneyNotString, Field: field, Message: fmt.Sprintf(
				"%s is the JSON number %s; money must be a JSON string such as \"2150.00\" and a number is never converted, to avoid rounding", field, raw)}
		}
	}
	return "", &normalize.RowError{Code: normalize.CodeInvalidType, Field: field, Message: field + " must be a JSON string"}
}

// jsonRawRow reads the eight pay-line fields as a CSV row's raw cells, to
// be normalised with the partner's settings.
func jsonRawRow(m payLine) (normalize.RawRow, *normalize.RowError) {
	var raw normalize.RawRow
	for _, f := range []struct {
		name          string
		val           jsontext.Value
		dst           *string
		money, number bool
	}{
		{normalize.FieldEmployeeRef, m.EmployeeRef, &raw.EmployeeRef, false, false},
		{normalize.FieldPayPeriod, m.PayPeriod, &raw.PayPeriod, false, false},
		{normalize.FieldComponent, m.Component, &raw.Component, false, false},
		{normalize.FieldAmount, m.Amount, &raw.Amount, true, false},
		{normalize.FieldCurrency, m.Currency, &raw.Currency, false, false},
		{normalize.FieldHours, m.Hours, &raw.Hours, false, true},
		{normalize.FieldRate, m.Rate, &raw.Rate, true, false},
		{normalize.FieldPayDate, m.PayDate, &raw.PayDate, false, false},
	} {
		v, bad := jsonText(f.val, f.name, f.money, f.number)
		if bad != nil {
			return raw, bad
		}
		*f.dst = v
	}
	return raw, nil
}
