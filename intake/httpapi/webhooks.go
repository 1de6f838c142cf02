package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/httpbody"
	"github.com/payintake/payintake/partnerauth"
)

// MaxWebhookIDLength is the longest webhook-id accepted.
const MaxWebhookIDLength = 255

// webhookAnswer is the JSON of a 200 answer to a webhook.
type webhookAnswer struct {
	Outcome     string `json:"outcome"`
	Code        string `json:"code"`
	Version     int64  `json:"version"`
	EntityID    string `json:"entity_id"`
	Message     string `json:"message,omitempty"`
	ExceptionID int64  `json:"exception_id,omitempty"`
	EmployeeID  string `json:"employee_id,omitempty"`
}

func (a *API) postWebhook(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	partner := r.PathValue("partner")
	body, err := a.readWebhookBody(w, r)
	if errors.Is(err, errReadersBusy) {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, newProblem(http.StatusServiceUnavailable, "busy",
			"too many webhook bodies are being received right now; deliver it again in a second"))
		return
	}
	if httpbody.TimedOut(err) {
		writeProblem(w, newProblem(http.StatusRequestTimeout, "body_timeout",
			fmt.Sprintf("the webhook body did not arrive within %s; nothing was stored: deliver it again", a.cfg.WebhookReadTimeout)))
		return
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeProblem(w, newProblem(http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("the webhook body is larger than %d bytes; send one pay-line change per webhook", a.cfg.MaxWebhookBody)))
			return
		}
		writeProblem(w, newProblem(http.StatusBadRequest, "body_unreadable", "the webhook body could not be read to its end; deliver it again"))
		return
	}

	// The signature first: nothing is parsed or stored before it holds.
	id := r.Header.Get("webhook-id")
	if p := a.verifyWebhook(r, partner, id, body); p != nil {
		writeProblem(w, *p)
		return
	}
	if len(id) > MaxWebhookIDLength {
		writeProblem(w, newProblem(http.StatusBadRequest, "invalid_webhook_id",
			fmt.Sprintf("the webhook-id has %d bytes; at most %d are allowed", len(id), MaxWebhookIDLength)))
		return
	}

	ans, err := a.in.DeliverWebhook(ctx, intake.Webhook{Partner: partner, ID: id, Body: body}, renderWebhook)
	if err != nil {
		a.internal(w, r, "deliver webhook", err)
		return
	}
	switch {
	case ans.BodyMismatch:
		// The reason, as the quarantine record keeps it.
		writeProblem(w, newProblem(http.StatusUnprocessableEntity, string(ans.Refused.Code), ans.Refused.Message))
		return
	case ans.Repeated:
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeResponse(w, storedResponse(ans.StoredAnswer))
}

// errReadersBusy: every webhook-reading slot stayed taken for a second.
var errReadersBusy = errors.New("too many webhook bodies being read")

// readWebhookBody reads the body under a.cfg.WebhookReadTimeout, holding one
// of a.cfg.WebhooksReading slots while it does.
func (a *API) readWebhookBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	// The deadline is set first (by httpbody.Reader), so that the wait for
	// a slot counts too.
	body := httpbody.Reader(w, r, httpbody.Limits{Max: a.cfg.MaxWebhookBody, Timeout: a.cfg.WebhookReadTimeout})
	wait := time.NewTimer(time.Second)
	defer wait.Stop()
	select {
	case a.reading <- struct{}{}:
	case <-wait.C:
		return nil, errReadersBusy
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	defer func() { <-a.reading }()
	return io.ReadAll(body)
}

func renderWebhook(res intake.WebhookResult) intake.Answer {
	if inv := res.Invalid; inv != nil {
		p := newProblem(http.StatusUnprocessableEntity, string(inv.Code), inv.Message)
		p.Title = "Invalid webhook body: nothing was applied, the body is kept in quarantine"
		p.Field = inv.Field
		p.Quarantined = true
		return problemResponse(p).stored()
	}
	return jsonResponse(http.StatusOK, webhookAnswer{Outcome: string(res.Outcome), Code: string(res.Code), Version: res.Version,
		EntityID: res.EntityID, Message: res.Message, ExceptionID: res.ExceptionID, EmployeeID: res.EmployeeID}).stored()
}

// verifyWebhook checks the Standard Webhooks signature: webhook-signature
// holds space-separated "v1,<base64 HMAC-SHA256>" over "id.timestamp.body"
// with any active secret of the partner, and webhook-timestamp (Unix
// seconds) is within the tolerance of now. It answers nil when it holds.
func (a *API) verifyWebhook(r *http.Request, partner, id string, body []byte) *problem {
	deny := func(code, detail string) *problem {
		p := newProblem(http.StatusUnauthorized, code, detail+"; nothing was stored")
		return &p
	}
	ts, sigs := r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return deny("signature_missing", "send the Standard Webhooks headers webhook-id, webhook-timestamp and webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return deny("timestamp_invalid", "webhook-timestamp must be the signing time in Unix seconds")
	}
	if skew := a.cfg.Now().Sub(time.Unix(sec, 0)); skew > a.cfg.Tolerance || skew < -a.cfg.Tolerance {
		return deny("timestamp_out_of_tolerance", fmt.Sprintf("webhook-timestamp is more than %s away from the server's clock (a replayed or delayed message); sign it again when sending", a.cfg.Tolerance))
	}
	// A malformed partner (invalid UTF-8 included) is an unknown one: no
	// secret of it can match.
	ok, err := a.creds.WebhookSigned(r.Context(), partner, id, ts, body, sigs)
	if err != nil {
		a.log.ErrorContext(r.Context(), "read webhook secrets", "err", err)
	} else if ok {
		ok, err = a.allowedFrom(r, partner, partnerauth.DoorWebhook)
	}
	if err != nil {
		p := newProblem(http.StatusInternalServerError, "internal_error", "the signature could not be checked; deliver the webhook again later")
		return &p
	}
	if !ok {
		// A sender outside the partner's allow-from is answered as a bad
		// signature: it learns nothing of the allowlist.
		return deny("signature_invalid", "no webhook-signature matches the body with an active secret of this partner")
	}
	return nil
}

// Sign returns a Standard Webhooks signature ("v1,<base64>") of body with
// the secret in its printable form (whsec_...), for senders and tests.
func Sign(secret, id string, ts int64, body []byte) (string, error) {
	return partnerauth.Sign(secret, id, ts, body)
}
