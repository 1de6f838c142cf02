package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// jsonText reads field of a JSON object (decoded with UseNumber) that must
// be a JSON string, or with number also a JSON number. Money (money true)
// as a JSON number is refused (money_not_string): it is never converted, to
// avoid rounding. Absent and null are "". Webhooks and leg replays share it.
func jsonText(m map[string]json.RawMessage, field string, money, number bool) (string, *records.WebhookInvalid) {
	raw := bytes.TrimSpace(m[field])
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch c := raw[0]; {
	case c == '"':
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", &records.WebhookInvalid{Code: "invalid_json", Field: field, Message: field + " is not a valid JSON string"}
		}
		return v, nil
	case c == '-' || (c >= '0' && c <= '9'):
		if number {
			return string(raw), nil
		}
		if money {
			return "", &records.WebhookInvalid{Code: "money_not_string", Field: field, Message: fmt.Sprintf(
				"%s is the JSON number %s; money must be a JSON string such as \"2150.00\" and a number is never converted, to avoid rounding", field, raw)}
		}
	}
	return "", &records.WebhookInvalid{Code: "invalid_type", Field: field, Message: field + " must be a JSON string"}
}

// jsonRawRow reads the eight pay-line fields of a JSON object as a CSV row's
// raw cells, to be normalised with the partner's settings.
func jsonRawRow(m map[string]json.RawMessage) (normalize.RawRow, *records.WebhookInvalid) {
	var raw normalize.RawRow
	for _, f := range []struct {
		name          string
		dst           *string
		money, number bool
	}{
		{normalize.FieldEmployeeRef, &raw.EmployeeRef, false, false},
		{normalize.FieldPayPeriod, &raw.PayPeriod, false, false},
		{normalize.FieldComponent, &raw.Component, false, false},
		{normalize.FieldAmount, &raw.Amount, true, false},
		{normalize.FieldCurrency, &raw.Currency, false, false},
		{normalize.FieldHours, &raw.Hours, false, true},
		{normalize.FieldRate, &raw.Rate, true, false},
		{normalize.FieldPayDate, &raw.PayDate, false, false},
	} {
		v, bad := jsonText(m, f.name, f.money, f.number)
		if bad != nil {
			return raw, bad
		}
		*f.dst = v
	}
	return raw, nil
}
