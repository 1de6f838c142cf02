// Package problems is the one vocabulary of payintake's HTTP error answers
// and the one way to write them: RFC 9457 problem documents
// (application/problem+json) whose type is Base + code, for every HTTP
// surface (the partner API, webhooks, the review API). GET Base + code
// explains a code (Handler).
package problems

import (
	"bytes"
	"encoding/json"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Base is where problem types point: every problem document's type is Base
// + its code (a reference relative to the server), and GET there explains
// the code and what to do; GET /v1/problems lists all.
const Base = "/v1/problems/"

// Doc explains one code.
type Doc struct {
	Code   string
	Status string // the HTTP status(es) it comes with
	Means  string
	Do     string
}

// Docs is the one vocabulary of the codes payintake answers with over HTTP:
// the partner API's, the webhook body's, the row codes a quarantined webhook
// can carry (the same codes as in result files) and the review API's.
// TestProblemCodesDocumented (intake/httpapi) and TestReviewProblemCodes
// (review) keep it complete.
var Docs = []Doc{
	{"unauthorized", "401", "The API token is missing, malformed, unknown or revoked.", "Send the partner's token as `Authorization: Bearer TOKEN`; an operator issues one with `payintake partner token ID`."},
	{"idempotency_key_missing", "400", "A submission came without an Idempotency-Key header.", "Send a key unique to the submission (for example a UUID) and the same key on every retry of it."},
	{"idempotency_key_malformed", "400", "The Idempotency-Key is empty, repeated, too long (over 255 characters), badly quoted or not printable ASCII.", "Send exactly one key of 1 to 255 printable ASCII characters."},
	{"idempotency_key_in_progress", "409", "Another request with this Idempotency-Key is still being processed.", "Retry after the Retry-After seconds with the same key and body: you then get its result."},
	{"idempotency_key_reuse", "422", "The Idempotency-Key was already used with a different body. Nothing was applied; the body is kept for audit.", "Send a new submission under a new key, or resend the original body unchanged."},
	{"idempotency_key_parameter_mismatch", "422", "The Idempotency-Key was already used for a request with other parameters.", "Repeat the original request exactly, or use a new key for a new request."},
	{"invalid_name", "400", "The ?name= of a submission is missing or not a plain file name.", "Give the file's name as it would be uploaded over SFTP (one rule for every door: at most 255 bytes of UTF-8, no leading or trailing spaces, no control or format characters such as U+202E or zero-width spaces, no slashes or backslashes); it names the result and is checked against the agreed file pattern."},
	{"body_too_large", "413", "The body is larger than the server accepts (64 MiB for a submission, 4 MiB for a leg replay, 1 MiB for a webhook, 64 KiB for a review API body); a declared size over it is refused before the body is read.", "Split the payroll run into several submissions or replays; send one pay-line change per webhook."},
	{"body_timeout", "408", "The body did not arrive within the server's deadline (10 s for a webhook; for a submission, a leg replay or a review API body 30 s plus its size at 32 KiB/s by default); nothing was stored and the connection was closed.", "Send the request again (same Idempotency-Key or webhook-id); send the whole body at once."},
	{"busy", "503", "Too many webhook bodies were being received at once; this one was not read.", "Deliver it again after the seconds in Retry-After (Standard Webhooks senders retry by themselves)."},
	{"body_unreadable", "400", "The body could not be read to its end (the connection broke or was too slow).", "Send the request again with the same Idempotency-Key or webhook-id."},
	{"not_found", "404", "There is no such resource for you: another partner's submissions do not exist for a partner, another partner's exceptions do not exist for a reviewer scoped to other partners.", "Check the id or path; the API is described at /v1/openapi.json."},
	{"method_not_allowed", "405", "The path exists but not with this method.", "Use one of the methods in the Allow header."},
	{"not_ready", "409", "The submission has no result yet.", "Retry after the Retry-After seconds."},
	{"row_not_replayable", "422", "A leg replay names a row that was not rejected or held in the submission, is not one of its rows, or is named twice. Nothing was applied.", "Replay only the rows that GET /v1/submissions/{id}/rows?outcome=rejected,held lists, once each; send changes to other rows as a new submission."},
	{"not_replayable", "422", "The submission was not processed (its key was reused, or its upload was cut off), so it has no rows to replay.", "Send the file as a new submission."},
	{"invalid_rows", "422", "A leg replay's body has no rows, or more than 10,000. Nothing was applied.", "Send {\"rows\": [...]} with 1 to 10,000 corrected rows; split larger replays."},
	{"invalid_row", "422", "A leg replay's row index is missing or not a positive integer (in a replay file: its row column). Nothing was applied.", "Give each corrected row the row index of the submission's row it corrects (the row column of result.csv)."},
	{"invalid_cursor", "400", "The cursor of a listing is not one the server gave.", "Start the listing again without a cursor and follow the next links."},
	{"invalid_limit", "400", "The limit of a listing is not a whole number in range.", "Give a limit from 1 to the documented maximum."},
	{"invalid_status", "400", "The status filter of a listing is not a known status.", "Use one of the statuses in the API description."},
	{"invalid_outcome", "400", "The outcome filter of a listing is not a known row outcome.", "Use created, updated, unchanged, held, stale or rejected."},
	{"unauthenticated", "401", "A review API request came without valid reviewer credentials: no HTTP Basic password or reviewer token, a wrong one, an expired token or a disabled reviewer.", "Send the reviewer's name and password (HTTP Basic) or a token from POST /v1/review/token as `Authorization: Bearer TOKEN`."},
	{"forbidden", "403", "A reviewer named a partner outside the partners they may review (a filter or a bulk decision). Nothing was decided; the refusal is audited.", "Ask an operator to widen the reviewer's scope (`payintake reviewer add NAME --partners ...`), or leave the partner out."},
	{"cross_origin", "403", "A state-changing review request came from another web site (browser Origin or Sec-Fetch-Site). Nothing was done.", "Open the payintake console directly, or call the API from a non-browser client."},
	{"already_decided", "409", "The exception was already decided (or superseded); the answer carries exception_status, decided_by, decided_at and superseded_by.", "Reload the exception; decide the newer one if it was superseded."},
	{"component", "422", "An approval's as_component does not fit the exception: missing for a row held for its component code (unknown_component), given for another exception or for a rejection, not a component, or one the row cannot take (another open exception of that key, a meaning reviewers gave the code otherwise, an employee the partner rejects, a newer file's record). Nothing was decided.", "Approve a row held for its component code with {\"as_component\": \"COMPONENT\"} (the component its code means), or reject it; approve other exceptions without one; the detail says which applies."},
	{"stale", "409", "The record changed after the exception was raised, so approving it would overwrite newer values. Nothing was applied.", "Look at the record's history; reject this exception, or let the newer change be reviewed."},
	{"login_busy", "503", "Too many reviewer logins were being checked at once; this one was not checked (Retry-After says when to retry).", "Retry after the Retry-After seconds."},
	{"login_locked", "429", "Too many failed logins for this reviewer or from this address; logins are refused for a while (Retry-After), also with the right password.", "Wait for the Retry-After seconds, or ask an operator to run `payintake reviewer unlock NAME` (or `--address IP`)."},
	{"bad_request", "400, 415", "A review API request is malformed: a bad filter, status, limit, cursor or id, a body that is not the documented JSON (or not `application/json`), a member of the wrong JSON type.", "Fix the request as the detail says; the review API is described in docs/review.md."},
	{"internal_error", "500", "The server could not complete the request (for example the database was unreachable). Nothing half-done is kept.", "Retry later with the same Idempotency-Key or webhook-id; if it persists, tell the operator the X-Request-Id."},
	{"signature_missing", "401", "A webhook came without webhook-id, webhook-timestamp or webhook-signature. Nothing was stored.", "Sign every delivery per Standard Webhooks with a secret from `payintake partner webhook-secret ID`."},
	{"signature_invalid", "401", "No webhook-signature matches the body with an active secret of the partner. Nothing was stored.", "Sign `id.timestamp.body` with HMAC-SHA256 and the current secret; check that the body is sent byte for byte as signed."},
	{"timestamp_invalid", "401", "webhook-timestamp is not Unix seconds. Nothing was stored.", "Send the signing time as whole Unix seconds."},
	{"timestamp_out_of_tolerance", "401", "webhook-timestamp is more than 5 minutes from the server's clock (a replayed or delayed message, or a wrong clock). Nothing was stored.", "Sign again at sending time, and keep the sender's clock in sync (NTP)."},
	{"invalid_webhook_id", "400", "The webhook-id is longer than 255 bytes.", "Use a shorter, unique id per message."},
	{"webhook_id_reuse", "422", "The webhook-id was already delivered with a different body. Nothing was applied; the body is kept for audit.", "Give every new message its own webhook-id; a redelivery sends the same body."},
	{"invalid_json", "422", "The webhook or leg replay body is not one JSON object of the documented shape (or a field is not valid JSON). Nothing applied (a webhook's body is quarantined).", "Send one JSON object per delivery."},
	{"unknown_member", "422", "A JSON body has a member this request does not take (field says which). Names are matched exactly, case included. Nothing applied (a webhook's body is quarantined; a leg replay or review request is refused whole).", "Send only the documented members, spelt as documented."},
	{"duplicate_key", "422", "A JSON body names one member twice in an object, exactly or in another case (`dry_run` and `DRY_RUN`; field says which, e.g. amount or rows[0].AMOUNT). Nothing applied (a webhook's body is quarantined; a leg replay or review request is refused whole).", "Send each field once: a repeated field is never resolved by taking the first or the last value."},
	{"invalid_type", "422", "A webhook field has the wrong JSON type. Quarantined, nothing applied.", "Send the pay-line fields as JSON strings (version as an integer)."},
	{"money_not_string", "422", "amount or rate is a JSON number. Money is never converted from a number, to avoid rounding. Nothing applied (a webhook's body is quarantined; a leg replay is refused whole).", "Send money as a JSON string such as \"2150.00\"."},
	{"invalid_entity_id", "422", "entity_id is longer than 255 bytes. Quarantined, nothing applied.", "Use the sender's id of the pay line, at most 255 bytes."},
	{"invalid_version", "422", "version is not a non-negative JSON integer. Quarantined, nothing applied.", "Send the pay line's version as an integer that grows with every change."},
	{"missing_value", "422", "A required value is missing (field says which). In a file this rejects the row.", "Send the value."},
	{"mangled_identifier", "422", "employee_ref looks like spreadsheet scientific notation (1.23E+05): the real id was lost.", "Export the id as text and send it again."},
	{"invalid_identifier", "422", "An identifier (employee_ref, pay_period or component; field says which) is longer than 128 characters.", "Check the column mapping and send the identifier itself."},
	{"invalid_amount", "422", "amount is not a decimal amount (exponents and other forms are refused).", "Send a plain decimal such as 1234.50."},
	{"invalid_rate", "422", "rate is not a decimal number.", "Send a plain decimal."},
	{"invalid_hours", "422", "hours is not a decimal number.", "Send a plain decimal."},
	{"too_many_decimals", "422", "The amount has more decimals than its currency allows; it is never rounded.", "Send the exact amount with at most the currency's decimals."},
	{"invalid_currency", "422", "currency is not a 3-letter ISO 4217 code.", "Send a code such as USD or EUR."},
	{"currency_mismatch", "422", "A value's currency symbol or code differs from the row's currency.", "Make the amount and the currency agree."},
	{"invalid_date", "422", "pay_date is not ISO YYYY-MM-DD nor the partner's agreed date format; dates are never guessed.", "Send YYYY-MM-DD."},
	{"too_many_cells", "422", "A CSV row has more non-empty cells than the header has columns.", "Fix the row's delimiters or quoting."},
	{"malformed_row", "422", "A CSV row could not be read (quoting).", "Fix the row's quoting."},
}

// Known tells whether code is in Docs.
func Known(code string) bool {
	return slices.ContainsFunc(Docs, func(d Doc) bool { return d.Code == code })
}

// Problem is one problem document. Extra members (an answer's own details,
// such as decided_by) follow the fixed ones.
type Problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail,omitempty"`
	Code       string `json:"code,omitempty"`
	Field      string `json:"field,omitempty"`
	EnvelopeID int64  `json:"envelope_id,omitempty"`
	// Quarantined: the refused webhook body is kept for audit.
	Quarantined bool           `json:"quarantined,omitempty"`
	Instance    string         `json:"instance,omitempty"`
	Extra       map[string]any `json:"-"`
}

// New is the problem of code with status: type Base + code, title the
// status text, detail one sentence saying what to do.
func New(status int, code, detail string) Problem {
	return Problem{Type: Base + code, Title: http.StatusText(status), Status: status, Detail: detail, Code: code}
}

// JSON is the document's bytes, newline-terminated.
func (p Problem) JSON() []byte {
	type fixed Problem
	b, _ := json.Marshal(fixed(p))
	if len(p.Extra) > 0 {
		var buf bytes.Buffer
		buf.Write(b[:len(b)-1])
		for _, k := range slices.Sorted(maps.Keys(p.Extra)) {
			kb, _ := json.Marshal(k)
			vb, err := json.Marshal(p.Extra[k])
			if err != nil {
				continue
			}
			buf.WriteByte(',')
			buf.Write(kb)
			buf.WriteByte(':')
			buf.Write(vb)
		}
		buf.WriteByte('}')
		b = buf.Bytes()
	}
	return append(b, '\n')
}

// ContentType is a problem document's media type.
const ContentType = "application/problem+json"

// Write answers with p.
func Write(w http.ResponseWriter, p Problem) {
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.JSON())
}

var page = template.Must(template.New("problems").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>payintake problem codes</title></head>
<body><h1>payintake problem codes</h1>
<p>Every error of the payintake API is an RFC 9457 problem document (<code>application/problem+json</code>)
whose <code>type</code> is this page's address followed by its <code>code</code>. The same codes appear in
result files, webhook answers, the review API and the server's logs.</p>
{{range .}}<section id="{{.Code}}"><h2><a href="/v1/problems/{{.Code}}">{{.Code}}</a> <small>(HTTP {{.Status}})</small></h2>
<p><b>What it means:</b> {{.Means}}</p><p><b>What to do:</b> {{.Do}}</p></section>
{{end}}</body></html>
`))

// Handler serves GET /v1/problems (every code) and GET /v1/problems/{code}
// (one code; a not_found problem for an unknown one).
func Handler(w http.ResponseWriter, r *http.Request) {
	docs := Docs
	if code := r.PathValue("code"); code != "" {
		docs = nil
		for _, d := range Docs {
			if d.Code == code {
				docs = []Doc{d}
			}
		}
		if docs == nil {
			Write(w, New(http.StatusNotFound, "not_found", "there is no problem code "+strings.ToValidUTF8(code, "")+"; every code is listed at /v1/problems"))
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, docs)
}
