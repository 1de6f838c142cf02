package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/observe"
)

// observed wraps a route's handler so that its decision is counted and
// noted on the request's one log line (observe.Middleware writes it): the
// door, the partner, the reason code or outcome, and the ids to follow it
// (envelope, exception, webhook-id, the hash of the Idempotency-Key). The
// facts are read from the answer itself, so every path through a handler
// is covered, refusals included. Secrets, signatures and row contents are
// never noted.
func (a *API) observed(rt route, h func(*API, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	webhook := strings.HasPrefix(rt.path, "/v1/webhooks/")
	door := "http"
	if webhook {
		door = "webhook"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		notes := []slog.Attr{slog.String("door", door)}
		if webhook {
			notes = append(notes, slog.String("partner", clip(r.PathValue("partner"))))
			if id := r.Header.Get("webhook-id"); id != "" {
				notes = append(notes, slog.String("webhook_id", clip(id)))
			}
		}
		if key := r.Header.Get("Idempotency-Key"); key != "" {
			notes = append(notes, slog.String("key_hash", observe.KeyHash(key)))
		}
		observe.Note(r.Context(), notes...)
		cw := &captureWriter{ResponseWriter: w}
		h(a, cw, r)
		ans := cw.answer()
		observe.Note(r.Context(), ans.attrs()...)
		if webhook {
			a.in.Metrics.Webhook(ans.webhookResult())
		}
	}
}

// clip bounds a client-chosen value before it is logged.
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}

// answer is what an API response says, as far as an operator needs it.
type answer struct {
	status   int
	replayed bool
	body     struct {
		ID          int64          `json:"id"`
		Status      string         `json:"status"`
		Counts      map[string]int `json:"counts"`
		Code        string         `json:"code"`
		Outcome     string         `json:"outcome"`
		EnvelopeID  int64          `json:"envelope_id"`
		ExceptionID int64          `json:"exception_id"`
		Quarantined bool           `json:"quarantined"`
	}
}

func (ans answer) attrs() []slog.Attr {
	var as []slog.Attr
	b := ans.body
	if env := max(b.ID, b.EnvelopeID); env != 0 {
		as = append(as, slog.Int64("envelope", env))
	}
	if b.Status != "" {
		as = append(as, slog.String("envelope_status", b.Status))
	}
	if b.Outcome != "" {
		as = append(as, slog.String("outcome", b.Outcome))
	}
	if b.Code != "" {
		as = append(as, slog.String("code", b.Code))
	}
	if b.ExceptionID != 0 {
		as = append(as, slog.Int64("exception", b.ExceptionID))
	}
	if ans.replayed {
		as = append(as, slog.Bool("replayed", true))
	}
	if b.Quarantined {
		as = append(as, slog.Bool("quarantined", true))
	}
	if len(b.Counts) > 0 {
		as = append(as, intake.CountsAttr(b.Counts))
	}
	return as
}

// webhookResult is the label of payintake_webhook_deliveries_total.
func (ans answer) webhookResult() string {
	switch {
	case ans.replayed:
		return "replay"
	case ans.body.Quarantined:
		return "quarantined"
	case ans.status == http.StatusOK && ans.body.Outcome != "":
		return ans.body.Outcome
	case ans.body.Code != "":
		return ans.body.Code
	}
	return "status_" + http.StatusText(ans.status)
}

// captureWriter keeps the status and the first bytes of a JSON answer.
type captureWriter struct {
	http.ResponseWriter
	status int
	json   bool
	buf    bytes.Buffer
}

const captureMax = 16 << 10

func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		ct := w.Header().Get("Content-Type")
		w.json = strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "application/problem+json")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.json && w.buf.Len() < captureMax {
		w.buf.Write(p[:min(len(p), captureMax-w.buf.Len())])
	}
	return w.ResponseWriter.Write(p)
}

func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *captureWriter) answer() answer {
	ans := answer{status: w.status, replayed: w.Header().Get("Idempotent-Replayed") == "true"}
	if ans.status == 0 {
		ans.status = http.StatusOK
	}
	if w.json {
		_ = json.Unmarshal(w.buf.Bytes(), &ans.body) // a cut answer notes what it can
	}
	return ans
}
