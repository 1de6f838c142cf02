// Package observe is what every door of payintake shares for operators:
// the HTTP middleware that counts, times and logs each request once (with a
// request id returned to the client), the log handler that adds a
// request's ids to every line logged in its context, and the hash under
// which an Idempotency-Key is logged (never its value).
package observe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
)

// KeyHash is how an Idempotency-Key (or any client-chosen key) appears in
// logs: the first 16 hex digits of the SHA-256 of the key as sent. A partner
// can compute it to find their request; the key itself is never logged.
func KeyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:8])
}

type requestKey struct{}

// request is what the middleware keeps for one request in its context.
type request struct {
	id    string
	mu    sync.Mutex
	notes []slog.Attr
}

// RequestID is the id of the HTTP request ctx belongs to ("" outside one).
func RequestID(ctx context.Context) string {
	if r, _ := ctx.Value(requestKey{}).(*request); r != nil {
		return r.id
	}
	return ""
}

// Note adds attributes (partner, door, code, envelope, ...) to the one log
// line the middleware writes for the request of ctx when it is answered.
// Outside a request observed by the middleware it does nothing. A later
// note of the same key replaces an earlier one.
func Note(ctx context.Context, attrs ...slog.Attr) {
	r, _ := ctx.Value(requestKey{}).(*request)
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
next:
	for _, a := range attrs {
		for i := range r.notes {
			if r.notes[i].Key == a.Key {
				r.notes[i] = a
				continue next
			}
		}
		r.notes = append(r.notes, a)
	}
}

func (r *request) attrs() []slog.Attr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Attr(nil), r.notes...)
}

// Handler adds request_id (and, when tracing, trace_id) to every record
// logged with a context of an observed request, so that every line an HTTP
// request causes can be found by its id.
type Handler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" && !hasAttr(r, "request_id") {
		r.AddAttrs(slog.String("request_id", id))
	}
	if tid := traceID(ctx); tid != "" {
		r.AddAttrs(slog.String("trace_id", tid))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h Handler) WithAttrs(as []slog.Attr) slog.Handler { return Handler{h.Handler.WithAttrs(as)} }

// WithGroup implements slog.Handler.
func (h Handler) WithGroup(g string) slog.Handler { return Handler{h.Handler.WithGroup(g)} }

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}
