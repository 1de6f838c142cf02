// Package httpapi is payintake's HTTP API, two more doors into the same
// records as the SFTP drop zone:
//
//   - POST /v1/submissions: a CSV file as the request body, authenticated by
//     a partner's API token (Bearer), made idempotent by the Idempotency-Key
//     header (IETF httpapi Idempotency-Key draft). The body is spooled,
//     recorded as an envelope whose submission key is the Idempotency-Key,
//     and processed by intake in the request, exactly as an uploaded file.
//     GET /v1/submissions/{id} and GET /v1/submissions/{id}/result.csv read
//     it back.
//   - POST /v1/webhooks/{partner}: one pay-line change, signed per Standard
//     Webhooks, normalised like a CSV row and applied if its per-entity
//     version is new.
//
// Errors are RFC 7807 problem documents (application/problem+json). The
// OpenAPI 3.1 description is served at /v1/openapi.json.
//
// # Idempotency keys
//
// A key is claimed (insert-or-nothing) before the body is read, with a lease
// that the request renews while it works: a second request with the key gets
// 409 while the lease lives, and takes the key over once it has expired (the
// first holder crashed) or once the submission recorded under the key is
// processed (by the job queue, after the holder died with it): the retry
// then gets the submission's answer at once. A completed key stores the response, replayed
// verbatim with "Idempotent-Replayed: true" to a request with the same body
// (SHA-256) and refused with 422 for another body. Keys are kept for
// Config.Retention (72 hours by default) and then reaped in batches; the
// submission itself is kept for good, so a key reused after that still gets
// the first result again for the same bytes, and 422 for other bytes.
package httpapi

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/internal/httpbody"
	"github.com/payintake/payintake/internal/observe"
	"github.com/payintake/payintake/internal/problems"
	"github.com/payintake/payintake/partnerauth"
)

// Defaults of Config.
const (
	DefaultMaxBody        = 64 << 20
	DefaultMaxWebhookBody = 1 << 20
	DefaultLease          = 2 * time.Minute
	DefaultRetention      = 72 * time.Hour
	DefaultReapEvery      = time.Hour
	DefaultReapBatch      = 1000
	DefaultTolerance      = 5 * time.Minute
	// A webhook body (at most 1 MiB) is read within DefaultWebhookReadTimeout,
	// and at most DefaultWebhooksReading bodies are read at once, before any
	// signature is checked: a sender that stalls holds a slot and a socket
	// for seconds, not for ever, and stalled senders cannot hold unbounded
	// memory. A delivery that finds no free slot within a second gets 503
	// with Retry-After (Standard Webhooks senders retry).
	DefaultWebhookReadTimeout = 10 * time.Second
	DefaultWebhooksReading    = 64
)

// Config tunes the API. Zero values take the defaults above.
type Config struct {
	SpoolDir       string        // request bodies are spooled here before they are recorded (required)
	MaxBody        int64         // largest submission body; larger is 413
	MaxWebhookBody int64         // largest webhook body; larger is 413
	Lease          time.Duration // how long an in-progress Idempotency-Key blocks others without renewal
	Retention      time.Duration // how long the lease of a request that died is kept before it is reaped
	ReapEvery      time.Duration // how often the reaper runs
	ReapBatch      int           // leases deleted per statement
	Tolerance      time.Duration // accepted clock skew of webhook-timestamp
	// WebhookReadTimeout and WebhooksReading bound the reading of webhook
	// bodies (see DefaultWebhookReadTimeout).
	WebhookReadTimeout time.Duration
	WebhooksReading    int
	// Body bounds the reading of a submission's and a leg replay's body:
	// within Body.Timeout plus its size at Body.MinRate (Max is each
	// body's own; zero values: httpbody's defaults, 30 s and 32 KiB/s).
	Body httpbody.Limits
	Now  func() time.Time
	// Enqueue, when set (the serve job queue's Enqueue), schedules background
	// processing in the transaction that records a submission, so an
	// envelope is never durable without its job even if this process dies
	// before it finishes processing in the request. Processing twice is
	// harmless: the second finds the envelope done.
	Enqueue intake.AfterInsert
}

// Option adjusts the Config that Mount uses.
type Option func(*Config)

// WithBodyLimits sets Config.Body.
func WithBodyLimits(l httpbody.Limits) Option { return func(c *Config) { c.Body = l } }

// WithEnqueue makes submissions schedule their processing job as they are
// recorded (see Config.Enqueue).
func WithEnqueue(enqueue intake.AfterInsert) Option { return func(c *Config) { c.Enqueue = enqueue } }

// API serves the HTTP submission API and the webhook receiver. It speaks
// to intake (the work, and what is read back) and to partnerauth (whose a
// request is), never to the store.
type API struct {
	in      *intake.Intake
	creds   *partnerauth.Checker
	cfg     Config
	log     *slog.Logger
	reading chan struct{} // a token per webhook body being read
}

// New returns the API on in, checking partners' credentials with auth.
func New(in *intake.Intake, auth *partnerauth.Checker, cfg Config) *API {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxWebhookBody <= 0 {
		cfg.MaxWebhookBody = DefaultMaxWebhookBody
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.ReapEvery <= 0 {
		cfg.ReapEvery = DefaultReapEvery
	}
	if cfg.ReapBatch <= 0 {
		cfg.ReapBatch = DefaultReapBatch
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = DefaultTolerance
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WebhookReadTimeout <= 0 {
		cfg.WebhookReadTimeout = DefaultWebhookReadTimeout
	}
	if cfg.WebhooksReading <= 0 {
		cfg.WebhooksReading = DefaultWebhooksReading
	}
	if cfg.Body.Timeout <= 0 {
		cfg.Body.Timeout = httpbody.DefaultTimeout
	}
	if cfg.Body.MinRate <= 0 {
		cfg.Body.MinRate = httpbody.DefaultMinRate
	}
	return &API{in: in, creds: auth, cfg: cfg, log: in.Log,
		reading: make(chan struct{}, cfg.WebhooksReading)}
}

// Mount registers the API on mux with the default configuration (bodies
// spooled in DATA_DIR/spool/http) and runs the reaper of Idempotency-Key leases until ctx
// ends. It is what `payintake serve` calls.
func Mount(ctx context.Context, mux *http.ServeMux, in *intake.Intake, auth *partnerauth.Checker, dataDir string, opts ...Option) *API {
	cfg := Config{SpoolDir: filepath.Join(dataDir, "spool", "http")}
	for _, o := range opts {
		o(&cfg)
	}
	a := New(in, auth, cfg)
	a.Register(mux)
	go a.RunReaper(ctx)
	return a
}

type route struct {
	method, path string
	handler      func(*API, http.ResponseWriter, *http.Request)
}

// routes are every route of the API; the OpenAPI document lists the same.
var routes = []route{
	{"POST", "/v1/submissions", (*API).postSubmission},
	{"GET", "/v1/submissions", (*API).listSubmissions},
	{"GET", "/v1/submissions/{id}", (*API).getSubmission},
	{"GET", "/v1/submissions/{id}/rows", (*API).listRows},
	{"POST", "/v1/submissions/{id}/replays", (*API).postReplay},
	{"GET", "/v1/submissions/{id}/result.csv", (*API).getResult},
	{"GET", "/v1/submissions/{id}/review.csv", (*API).getReview},
	{"POST", "/v1/webhooks/{partner}", (*API).postWebhook},
	{"GET", "/v1/openapi.json", (*API).getOpenAPI},
	{"GET", "/v1/problems", (*API).getProblems},
	{"GET", problems.Base + "{code}", (*API).getProblems},
}

// Register adds the API's routes to mux, and answers every other request
// under /v1/ with a problem document (405 with Allow for a known path and
// another method, else 404) rather than the mux's plain text.
func (a *API) Register(mux *http.ServeMux) {
	paths := http.NewServeMux() // a route's path, whatever the method
	allow := map[string][]string{}
	for _, rt := range routes {
		// Guard: a request refused before its body is read (its token, its
		// size, a key in use) is answered at once and its connection
		// closed, without waiting for the body.
		mux.Handle(rt.method+" "+rt.path, httpbody.Guard(a.observed(rt, rt.handler)))
		if allow[rt.path] == nil {
			paths.HandleFunc(rt.path, http.NotFound)
		}
		allow[rt.path] = append(allow[rt.path], rt.method)
	}
	mux.Handle("/v1/", httpbody.Guard(a.observed(route{path: "/v1/"}, func(_ *API, w http.ResponseWriter, r *http.Request) {
		if _, p := paths.Handler(r); p != "" {
			w.Header().Set("Allow", strings.Join(allow[p], ", "))
			writeProblem(w, newProblem(http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow[p], " or "))))
			return
		}
		writeProblem(w, newProblem(http.StatusNotFound, "not_found",
			fmt.Sprintf("there is no %s; the API is described at /v1/openapi.json", r.URL.Path)))
	})))
}

// Handler returns a new mux with only the API on it.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	a.Register(mux)
	return mux
}

// Reap deletes the Idempotency-Key leases of requests that died, older than
// the retention, in batches.
func (a *API) Reap(ctx context.Context) (int64, error) {
	return a.in.ReapKeys(ctx, a.cfg.Retention, a.cfg.ReapBatch)
}

// RunReaper reaps at start and then every Config.ReapEvery until ctx ends.
// It also removes spool files a crashed process left behind (a day old: no
// request takes that long).
func (a *API) RunReaper(ctx context.Context) {
	t := time.NewTicker(a.cfg.ReapEvery)
	defer t.Stop()
	for {
		a.cleanSpool(24 * time.Hour)
		n, err := a.Reap(ctx)
		if err != nil && ctx.Err() == nil {
			a.log.ErrorContext(ctx, "reap idempotency keys", "err", err)
		} else if n > 0 {
			a.log.InfoContext(ctx, "idempotency keys reaped", "deleted", n, "retention", a.cfg.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *API) cleanSpool(age time.Duration) {
	files, _ := filepath.Glob(filepath.Join(a.cfg.SpoolDir, "http-*.part"))
	for _, f := range files {
		if info, err := os.Stat(f); err == nil && a.cfg.Now().Sub(info.ModTime()) > age {
			_ = os.Remove(f)
		}
	}
}

//go:embed openapi.json
var openAPI []byte

func (a *API) getOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}

// problem is an RFC 7807 problem document. Code is a snake_case reason, as in
// result files.
// problem is an answer's problem document: the one vocabulary and writer
// of every HTTP surface (internal/problems).
type problem = problems.Problem

func newProblem(status int, code, detail string) problem { return problems.New(status, code, detail) }

// response is an answer as it goes on the wire: its status, content type
// and body. A completed Idempotency-Key or webhook-id keeps it (stored: the
// status as the answer's code, the content type as its format) so that a
// repeat gets it again byte for byte.
type response struct {
	Status      int
	ContentType string
	Body        []byte
}

// stored is r as intake keeps it with a key.
func (r response) stored() intake.Answer {
	return intake.Answer{Code: r.Status, Format: r.ContentType, Body: r.Body}
}

// storedResponse is the response kept with a key, as it was written.
func storedResponse(a intake.Answer) response {
	return response{Status: a.Code, ContentType: a.Format, Body: a.Body}
}

func problemResponse(p problem) response {
	return response{Status: p.Status, ContentType: problems.ContentType, Body: p.JSON()}
}

func writeProblem(w http.ResponseWriter, p problem) { writeResponse(w, problemResponse(p)) }

// getProblems serves GET /v1/problems and GET /v1/problems/{code}.
func (a *API) getProblems(w http.ResponseWriter, r *http.Request) { problems.Handler(w, r) }

func writeResponse(w http.ResponseWriter, resp response) {
	w.Header().Set("Content-Type", resp.ContentType)
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

func jsonResponse(status int, v any) response {
	b, _ := json.Marshal(v)
	return response{Status: status, ContentType: "application/json", Body: append(b, '\n')}
}

// auth returns the partner of the request's bearer token, or answers 401.
func (a *API) auth(w http.ResponseWriter, r *http.Request) (string, bool) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	deny := func(detail string) (string, bool) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="payintake"`)
		writeProblem(w, newProblem(http.StatusUnauthorized, "unauthorized", detail))
		return "", false
	}
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return deny("send the partner's API token as \"Authorization: Bearer TOKEN\"; an operator issues one with `payintake partner token ID`")
	}
	partner, err := a.creds.TokenPartner(r.Context(), token)
	if errors.Is(err, partnerauth.ErrMalformedToken) {
		return deny("the API token is not valid: check it, or ask for a new one")
	}
	if err != nil {
		if r.Context().Err() == nil && !errors.Is(err, partnerauth.ErrUnknownToken) {
			a.log.ErrorContext(r.Context(), "check api token", "err", err)
			writeProblem(w, newProblem(http.StatusInternalServerError, "internal_error", "the token could not be checked; try again later"))
			return "", false
		}
		return deny("the API token is not valid or was revoked: check it, or ask for a new one")
	}
	if ok, err := a.allowedFrom(r, partner, partnerauth.DoorHTTP); err != nil {
		writeProblem(w, newProblem(http.StatusInternalServerError, "internal_error", "the token could not be checked; try again later"))
		return "", false
	} else if !ok {
		// Answered as a token that does not work: the client learns
		// nothing of the allowlist.
		return deny("the API token is not valid or was revoked: check it, or ask for a new one")
	}
	observe.Note(r.Context(), slog.String("partner", partner))
	return partner, true
}

// bodyLimits are Config.Body for a body of at most limit bytes.
func (a *API) bodyLimits(limit int64) httpbody.Limits {
	l := a.cfg.Body
	l.Max = limit
	return l
}

// bodyTimeout refuses a body that arrived too slowly (the connection is
// closed: its rest is never read).
func (a *API) bodyTimeout(what string) problem {
	return newProblem(http.StatusRequestTimeout, "body_timeout",
		fmt.Sprintf("the %s did not arrive within %s, or arrived slower than %d bytes a second after that; nothing was applied: send it again with the same Idempotency-Key", what, a.cfg.Body.Timeout, a.cfg.Body.MinRate))
}

func newOwner() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}

// allowedFrom reports whether partner's credentials, just checked at door,
// may be used from the request's client address (its allow-from); a
// refusal is logged, and the caller answers it as bad credentials. An
// error (logged): it could not be checked.
func (a *API) allowedFrom(r *http.Request, partner, door string) (bool, error) {
	addr := clientaddr.From(r)
	ok, err := a.creds.AllowedFrom(r.Context(), partner, door, addr)
	if err != nil {
		a.log.ErrorContext(r.Context(), "check the partner's allowed addresses", "partner", partner, "err", err)
		return false, err
	}
	if !ok {
		a.log.WarnContext(r.Context(), "credentials refused: client address not in the partner's allow-from",
			"partner", partner, "door", door, "client", addr.String())
	}
	return ok, nil
}
