package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/httpbody"
	"github.com/payintake/payintake/internal/observe"
)

// MaxKeyLength is the longest Idempotency-Key accepted, in characters.
const MaxKeyLength = 255

// outcomes are the counts every submission response lists, zeros included.
var outcomes = intake.Outcomes()

// outcomeList names the outcomes for a message: "created, updated, …".
func outcomeList() string {
	names := make([]string, len(outcomes))
	for i, o := range outcomes {
		names[i] = string(o)
	}
	return strings.Join(names, ", ")
}

// submission is the JSON of a submission.
type submission struct {
	ID        int64          `json:"id"`
	Status    string         `json:"status"`
	Name      string         `json:"name"`
	Counts    map[string]int `json:"counts"`
	ResultURL string         `json:"result_url"`
}

// submissionInfo is the JSON of GET /v1/submissions/{id}.
type submissionInfo struct {
	submission
	Source     string    `json:"source"`
	ReceivedAt time.Time `json:"received_at"`
	Size       int64     `json:"size"`
	RepeatOf   int64     `json:"replay_of,omitempty"`
	// ProfileVersion is the partner profile version the file was read
	// with (omitted: none).
	ProfileVersion int `json:"profile_version,omitempty"`
}

func newSubmission(env intake.Envelope) submission {
	counts := make(map[string]int, len(outcomes))
	for _, o := range outcomes {
		counts[string(o)] = 0
	}
	for k, v := range env.Counts {
		counts[k] = v
	}
	return submission{ID: env.ID, Status: env.Status, Name: env.FileName, Counts: counts,
		ResultURL: fmt.Sprintf("/v1/submissions/%d/result.csv", env.ID)}
}

// parseIdempotencyKey reads the Idempotency-Key header: an RFC 8941 string
// ("...") as the draft says, or, as many clients send it, the bare key. The
// key must be 1 to 255 printable ASCII characters.
func parseIdempotencyKey(h http.Header) (string, *problem) {
	vals := h.Values("Idempotency-Key")
	bad := func(code, detail string) (string, *problem) {
		p := newProblem(http.StatusBadRequest, code, detail)
		return "", &p
	}
	switch {
	case len(vals) == 0:
		return bad("idempotency_key_missing", "send an Idempotency-Key header with a key unique to this submission (for example a UUID); a retry of the same submission sends the same key")
	case len(vals) > 1:
		return bad("idempotency_key_malformed", "send exactly one Idempotency-Key header")
	}
	v := strings.TrimSpace(vals[0])
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		closed := false
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case closed:
				return bad("idempotency_key_malformed", "the quoted Idempotency-Key has characters after its closing quote")
			case c == '\\':
				if i+1 >= len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
					return bad("idempotency_key_malformed", `in a quoted Idempotency-Key a backslash may only escape " or \`)
				}
				i++
				b.WriteByte(v[i])
			case c == '"':
				closed = true
			default:
				b.WriteByte(c)
			}
		}
		if !closed {
			return bad("idempotency_key_malformed", "the quoted Idempotency-Key has no closing quote")
		}
		v = b.String()
	}
	if v == "" {
		return bad("idempotency_key_malformed", "the Idempotency-Key is empty; send a key unique to this submission (for example a UUID)")
	}
	if len(v) > MaxKeyLength {
		return bad("idempotency_key_malformed", fmt.Sprintf("the Idempotency-Key has %d characters; at most %d are allowed", len(v), MaxKeyLength))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return bad("idempotency_key_malformed", "the Idempotency-Key may only contain printable ASCII characters")
		}
	}
	return v, nil
}

// isPGPBody tells whether the request says its body is an OpenPGP message
// (Content-Type application/pgp-encrypted, RFC 3156); a name ending in
// .pgp, .gpg or .asc says so too (intake decides on both).
func isPGPBody(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == intake.PGPContentType
}

// submissionName checks the name query parameter: it names the result and
// is matched against the partner's file pattern, as an uploaded file name.
func submissionName(r *http.Request) (string, *problem) {
	name := r.URL.Query().Get("name")
	bad := func(detail string) (string, *problem) {
		p := newProblem(http.StatusBadRequest, "invalid_name", detail)
		return "", &p
	}
	if name == "" {
		return bad("give the file's name as ?name=NAME (for example payroll-2026-03.csv); it names the result and is checked against the agreed file pattern")
	}
	if err := intake.CheckFileName(name); err != nil {
		return bad(fmt.Sprintf("?name= is not a plain file name: %v; send the file's own name, as it would be uploaded over SFTP", err))
	}
	return name, nil
}

// postSubmission receives a submission under its Idempotency-Key. The key
// is the submission key, decided by Submit as every door's is: a new key
// is processed and answered 201; the same body again gets the first
// answer, marked Idempotent-Replayed (nothing recorded again); another
// body is idempotency_key_reuse. While one request works on a key it
// holds a lease on it, so that another request with the key gets 409
// (retry shortly) instead of racing it with a body that may differ.
func (a *API) postSubmission(w http.ResponseWriter, r *http.Request) {
	partner, ok := a.auth(w, r)
	if !ok {
		return
	}
	key, p := parseIdempotencyKey(r.Header)
	if p != nil {
		writeProblem(w, *p)
		return
	}
	name, p := submissionName(r)
	if p != nil {
		writeProblem(w, *p)
		return
	}
	if r.ContentLength > a.cfg.MaxBody {
		writeProblem(w, a.tooLarge())
		return
	}
	ctx := r.Context()
	owner := newOwner()
	lease, err := a.in.LeaseKey(ctx, partner, key, owner, a.cfg.Lease)
	if err != nil {
		a.internal(w, r, "lease idempotency key", err)
		return
	}
	if !lease.Leased {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, newProblem(http.StatusConflict, "idempotency_key_in_progress",
			"a request with this Idempotency-Key is still being processed; retry shortly with the same key and body to get its result"))
		return
	}
	if lease.TakenOver {
		a.log.InfoContext(ctx, "idempotency key taken over from a request whose lease ran out or whose submission is processed", "partner", partner, "key_hash", observe.KeyHash(key))
	}
	// The key is ours while we read and process; whatever the answer, the
	// lease ends with the request (the answer is the submission's).
	stop := a.keepLease(partner, key, owner)
	defer func() {
		stop()
		if err := a.in.ReleaseKey(context.WithoutCancel(ctx), partner, key, owner); err != nil {
			a.log.ErrorContext(ctx, "release idempotency key", "err", err)
		}
	}()
	path, p, err := a.spool(w, r)
	if p != nil {
		writeProblem(w, *p)
		return
	}
	if err != nil {
		a.internal(w, r, "spool request body", err)
		return
	}
	defer os.Remove(path)

	// The work finishes even if the client goes away (Detach): the next
	// retry then gets the stored answer. A queue worker that got there
	// first is waited for as long as the client waits.
	res, err := a.in.Submit(ctx, intake.Submission{Partner: partner, Name: name, Path: path, Source: "http"},
		&intake.SubmitOpts{Key: key, PGP: isPGPBody(r), Enqueue: a.cfg.Enqueue, Wait: true, Detach: true})
	got, out := res.Received, res.Outcome
	switch {
	case errors.Is(err, intake.ErrNameMismatch):
		writeProblem(w, nameMismatch(out, name))
		return
	case err != nil:
		// The envelope, if recorded, is durable; a retry with the same key
		// and body replays it and finishes its processing.
		a.internal(w, r, "submit", err)
		return
	case got.Status == intake.StatusKeyReuse:
		// Other bytes under the key: recorded (as a file would be) so the
		// bytes are kept for audit, rejected, nothing applied.
		writeProblem(w, keyReuse(got.ID))
		return
	}
	w.Header().Set("Location", fmt.Sprintf("/v1/submissions/%d", out.ID))
	if got.Status == intake.StatusRepeat {
		// The same submission came before (under this key, or as a file of
		// that name by another door): its answer, nothing applied again.
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeResponse(w, jsonResponse(http.StatusCreated, newSubmission(out)))
}

// nameMismatch refuses a repeat of a submission (same key, same body) under
// another ?name=: replaying the first answer would silently file the
// partner's result under a name it did not ask for.
func nameMismatch(first intake.Envelope, name string) problem {
	p := newProblem(http.StatusUnprocessableEntity, "idempotency_key_parameter_mismatch",
		fmt.Sprintf("the parameter name differs: this Idempotency-Key was first used with name=%q and now with name=%q; nothing from this request was applied: repeat the request with name=%q to get its result, or send the new name under a new key", first.FileName, name, first.FileName))
	p.Field = "name"
	p.EnvelopeID = first.ID
	return p
}

func keyReuse(envelope int64) problem {
	p := newProblem(http.StatusUnprocessableEntity, "idempotency_key_reuse",
		"this Idempotency-Key was already used for a different body; nothing from this request was applied: send a new submission under a new key, or resend the original body unchanged")
	p.EnvelopeID = envelope
	return p
}

func (a *API) tooLarge() problem {
	return newProblem(http.StatusRequestEntityTooLarge, "body_too_large",
		fmt.Sprintf("the body is larger than %d bytes; split the payroll run into several submissions", a.cfg.MaxBody))
}

// spool copies the request body to a new file in the spool dir. A body
// over the limit gives a 413 problem.
func (a *API) spool(w http.ResponseWriter, r *http.Request) (path string, p *problem, err error) {
	if err := os.MkdirAll(a.cfg.SpoolDir, 0o750); err != nil {
		return "", nil, fmt.Errorf("create spool dir: %w", err)
	}
	f, err := os.CreateTemp(a.cfg.SpoolDir, "http-*.part")
	if err != nil {
		return "", nil, fmt.Errorf("create spool file: %w", err)
	}
	_, err = io.Copy(f, httpbody.Reader(w, r, a.bodyLimits(a.cfg.MaxBody)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			tl := a.tooLarge()
			return "", &tl, nil
		}
		if httpbody.TimedOut(err) {
			slow := a.bodyTimeout("submission body")
			return "", &slow, nil
		}
		bad := newProblem(http.StatusBadRequest, "body_unreadable", "the request body could not be read to its end; send the submission again with the same Idempotency-Key")
		return "", &bad, nil
	}
	return f.Name(), nil, nil
}

// keepLease renews the key's lease until the returned stop is called.
func (a *API) keepLease(partner, key string, owner []byte) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if ok, err := a.in.RenewKey(ctx, partner, key, owner, a.cfg.Lease); err != nil && ctx.Err() == nil {
					a.log.ErrorContext(ctx, "renew idempotency lease", "err", err)
				} else if err == nil && !ok {
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (a *API) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	a.log.ErrorContext(r.Context(), what, "err", err)
	writeProblem(w, newProblem(http.StatusInternalServerError, "internal_error",
		"the server could not complete the request; retry it with the same Idempotency-Key"))
}

func isNotFound(err error) bool { return errors.Is(err, intake.ErrNotFound) }

// envelopeOf reads the partner's envelope named by the {id} path value and
// its outcome (the original's, for a replay), or answers 404: another
// partner's submissions do not exist for this one.
func (a *API) envelopeOf(w http.ResponseWriter, r *http.Request) (env, out intake.Envelope, ok bool) {
	partner, ok := a.auth(w, r)
	if !ok {
		return env, out, false
	}
	notFound := func() (intake.Envelope, intake.Envelope, bool) {
		writeProblem(w, newProblem(http.StatusNotFound, "not_found", "there is no submission with this id for your partner account"))
		return intake.Envelope{}, intake.Envelope{}, false
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return notFound()
	}
	env, out, err = a.in.PartnerEnvelope(r.Context(), partner, id)
	if isNotFound(err) {
		return notFound()
	}
	if err != nil {
		a.internal(w, r, "read envelope", err)
		return env, out, false
	}
	return env, out, true
}

func (a *API) getSubmission(w http.ResponseWriter, r *http.Request) {
	env, _, ok := a.envelopeOf(w, r)
	if !ok {
		return
	}
	info, err := a.info(r, env)
	if err != nil {
		a.internal(w, r, "read submission", err)
		return
	}
	writeResponse(w, jsonResponse(http.StatusOK, info))
}

func (a *API) getResult(w http.ResponseWriter, r *http.Request) {
	env, out, ok := a.envelopeOf(w, r)
	if !ok {
		return
	}
	if !out.Done() || out.Status == intake.StatusIncomplete {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, newProblem(http.StatusConflict, "not_ready", "this submission has no result yet; try again shortly"))
		return
	}
	// Rows replayed since show their latest outcomes, with the replay that
	// produced each (the original stays at ?original=1).
	f, err := a.in.ResultFile(r.Context(), env, out, r.URL.Query().Get("original") != "")
	if err != nil {
		a.internal(w, r, "read replayed legs", err)
		return
	}
	name := intake.ResultName(env.FileName)
	if f.Sealed {
		w.Header().Set("Content-Type", intake.PGPContentType)
		name += intake.SealedSuffix
	} else {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	}
	if f.Size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	if err := f.WriteTo(r.Context(), w); err != nil {
		// Headers are gone: cut the body short so the client sees a broken transfer.
		a.log.ErrorContext(r.Context(), "write result", "envelope", env.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// getReview serves the review report of a submission (NAME.review.csv over
// SFTP), written once every exception it raised is decided; the
// review.completed notification points here.
func (a *API) getReview(w http.ResponseWriter, r *http.Request) {
	env, out, ok := a.envelopeOf(w, r)
	if !ok {
		return
	}
	var b bytes.Buffer
	sealed, err := a.in.ReviewReport(r.Context(), out.ID, &b)
	if errors.Is(err, intake.ErrNotFound) {
		w.Header().Set("Retry-After", "60") // reviewers decide in human time
		writeProblem(w, newProblem(http.StatusConflict, "not_ready",
			"this submission has no review report: it is written once every row it had held is decided by a reviewer (and never for a submission that held nothing)"))
		return
	}
	if err != nil {
		a.internal(w, r, "read review report", err)
		return
	}
	name := intake.ReviewReportName(env.FileName)
	if sealed {
		w.Header().Set("Content-Type", intake.PGPContentType)
		name += intake.SealedSuffix
	} else {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	_, _ = w.Write(b.Bytes())
}
