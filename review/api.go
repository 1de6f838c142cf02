package review

// The JSON API, under /v1/review/:
//
//	POST /v1/review/token                          Basic auth → {"token", "expires_at"}
//	GET  /v1/review/exceptions?partner=&period=&status=&file=&code=&component=&employee=&min_change=&max_change=&after=&limit=
//	                                               → {"exceptions": [...], "counts": {...}, "next": URL|null}
//	GET  /v1/review/exceptions/{id}                → the exception, its record, history, stale reason
//	POST /v1/review/exceptions/{id}/approve        body {"note": "...", "as_component": "..."} (optional) → the decided exception
//	POST /v1/review/exceptions/{id}/reject         body {"note": "..."} (optional) → the decided exception
//	POST /v1/review/bulk/approve                   body {"partner", "period", "file", "code", "component",
//	POST /v1/review/bulk/reject                          "employee", "min_change", "max_change", "note", "dry_run", "as_component"}
//	                                               → {"status", "matched", "total_change", "decided", "refused", "dry_run"}
//
// Errors are RFC 9457 problem documents (application/problem+json) of the
// one vocabulary of every HTTP surface (internal/problems): type
// "/v1/problems/CODE" and member "code": unauthenticated (401), forbidden
// (403), not_found (404), already_decided and stale (409), duplicate_key
// and component (422), bad_request (400, 415), login_locked (429), login_busy (503).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payintake/payintake/internal/httpbody"
	"github.com/payintake/payintake/internal/problems"
	"github.com/payintake/payintake/internal/strictjson"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

const (
	defaultPageSize = 50
	maxPageSize     = 500
)

func (s *Server) routesAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/review/token", s.apiToken)
	mux.HandleFunc("GET /v1/review/exceptions", s.authAPI(s.apiList))
	mux.HandleFunc("GET /v1/review/exceptions/{id}", s.authAPI(s.apiShow))
	mux.HandleFunc("POST /v1/review/exceptions/{id}/approve", s.authAPI(s.apiDecide(true)))
	mux.HandleFunc("POST /v1/review/exceptions/{id}/reject", s.authAPI(s.apiDecide(false)))
	mux.HandleFunc("POST /v1/review/bulk/approve", s.authAPI(s.apiBulk(true)))
	mux.HandleFunc("POST /v1/review/bulk/reject", s.authAPI(s.apiBulk(false)))
	mux.HandleFunc("/v1/review/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, "not_found", "Not found",
			"no such review endpoint: see GET /v1/review/exceptions", nil)
	})
}

// writeProblem writes an RFC 7807 problem document.
// writeProblem answers with the problem document of code (one of
// problems.Docs), a title of the review API's own, and extra members.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, code, title, detail string, extra map[string]any) {
	p := problems.New(status, code, detail)
	p.Title, p.Instance, p.Extra = title, r.URL.Path, extra
	if f, ok := extra["field"].(string); ok {
		p.Field = f
		delete(p.Extra, "field")
	}
	w.Header().Set("Cache-Control", "no-store")
	problems.Write(w, p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func unauthorized(w http.ResponseWriter, r *http.Request, detail string) {
	w.Header().Add("WWW-Authenticate", `Bearer realm="payintake review"`)
	w.Header().Add("WWW-Authenticate", `Basic realm="payintake review", charset="UTF-8"`)
	writeProblem(w, r, http.StatusUnauthorized, "unauthenticated", "Authentication required", detail, nil)
}

// authAPI authenticates an API request with a bearer token or HTTP Basic.
func (s *Server) authAPI(h func(http.ResponseWriter, *http.Request, records.Reviewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		authz := r.Header.Get("Authorization")
		if tok, ok := strings.CutPrefix(authz, "Bearer "); ok {
			sess, err := s.Store.SessionByToken(ctx, tokenHash(strings.TrimSpace(tok)), "api")
			if errors.Is(err, records.ErrNotFound) {
				unauthorized(w, r, "the bearer token is unknown or expired: get a new one with POST /v1/review/token")
				return
			}
			if err != nil {
				s.internal(w, r, err)
				return
			}
			h(w, r, sess.Reviewer)
			return
		}
		if name, pw, ok := r.BasicAuth(); ok {
			if rv, ok := s.loginAPI(w, r, name, pw); ok {
				h(w, r, rv)
			}
			return
		}
		unauthorized(w, r, "send Authorization: Bearer TOKEN (from POST /v1/review/token) or HTTP Basic with a reviewer's name and password")
	}
}

// loginAPI checks a reviewer's name and password for the API; when they do
// not log in, it has answered (401, or 500) and returns false.
func (s *Server) loginAPI(w http.ResponseWriter, r *http.Request, name, pw string) (records.Reviewer, bool) {
	rv, err := s.login(r.Context(), name, pw, clientAddress(r), records.ViaAPI, false)
	if errors.Is(err, errBadCredentials) {
		unauthorized(w, r, "wrong reviewer name or password")
		return rv, false
	}
	var le *lockedError
	if errors.As(err, &le) {
		w.Header().Set("Retry-After", retryAfter(err))
		writeProblem(w, r, http.StatusTooManyRequests, "login_locked", "Too many failed logins",
			"too many failed logins for this name or from this address: wait for the time in Retry-After (it doubles with each further failure), or ask an operator to run `payintake reviewer unlock NAME`", nil)
		return rv, false
	}
	if errors.Is(err, errBusy) {
		w.Header().Set("Retry-After", retryAfter(err))
		writeProblem(w, r, http.StatusServiceUnavailable, "login_busy", "Too many logins at once",
			"the server is checking other logins right now: try again in a second, or use a bearer token from POST /v1/review/token instead of HTTP Basic on every request", nil)
		return rv, false
	}
	if err != nil {
		s.internal(w, r, err)
		return rv, false
	}
	return rv, true
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.Log.ErrorContext(r.Context(), "review api", "path", r.URL.Path, "err", err)
	writeProblem(w, r, http.StatusInternalServerError, "internal_error", "Internal error",
		"the server could not complete the request; try again, and tell the operator if it persists", nil)
}

// apiToken exchanges HTTP Basic credentials for a bearer token.
func (s *Server) apiToken(w http.ResponseWriter, r *http.Request) {
	name, pw, ok := r.BasicAuth()
	if !ok {
		unauthorized(w, r, "POST /v1/review/token needs HTTP Basic with a reviewer's name and password")
		return
	}
	rv, ok := s.loginAPI(w, r, name, pw)
	if !ok {
		return
	}
	tok, _, exp, err := s.newSession(r.Context(), rv.Name, "api")
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.audit(r.Context(), records.AuditEntry{Actor: rv.Name, Via: records.ViaAPI, Action: "token"})
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "token_type": "Bearer", "expires_at": exp.UTC()})
}

func (s *Server) apiList(w http.ResponseWriter, r *http.Request, rv records.Reviewer) {
	q := r.URL.Query()
	f := records.ExceptionFilter{Scope: rv.Partners, Partner: q.Get("partner"), Period: q.Get("period"), Status: q.Get("status"),
		File: q.Get("file"), Code: normalize.Code(q.Get("code")), Component: q.Get("component"), Employee: q.Get("employee"),
		MinChange: q.Get("min_change"), MaxChange: q.Get("max_change")}
	if err := f.Check(); err != nil {
		writeProblem(w, r, http.StatusBadRequest, "bad_request", "Bad filter", err.Error(), nil)
		return
	}
	switch f.Status {
	case "", records.ExceptionOpen, records.ExceptionApproved, records.ExceptionRejected, records.ExceptionSuperseded:
	default:
		writeProblem(w, r, http.StatusBadRequest, "bad_request", "Bad status filter",
			fmt.Sprintf("status %q: use open, approved, rejected or superseded", f.Status), nil)
		return
	}
	if f.Partner != "" && !records.InScope(rv.Partners, f.Partner) {
		s.denied(w, r, rv, records.ViaAPI, 0, f.Partner)
		return
	}
	limit := defaultPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			writeProblem(w, r, http.StatusBadRequest, "bad_request", "Bad limit",
				fmt.Sprintf("limit %q: use a whole number from 1 to %d", v, maxPageSize), nil)
			return
		}
		limit = n
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, r, http.StatusBadRequest, "bad_request", "Bad cursor",
				fmt.Sprintf("after %q: use the id of the last exception of the previous page (the next link gives it)", v), nil)
			return
		}
		f.AfterID = n
	}
	f.Limit = limit + 1
	xs, err := s.Store.Exceptions(r.Context(), f)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	counts, err := s.Store.ExceptionCounts(r.Context(), f)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	var next any
	if len(xs) > limit {
		xs = xs[:limit]
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("after", strconv.FormatInt(xs[len(xs)-1].ID, 10))
		nq.Set("limit", strconv.Itoa(limit))
		next = "/v1/review/exceptions?" + nq.Encode()
	}
	if xs == nil {
		xs = []records.Exception{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"exceptions": xs, "counts": counts, "next": next})
}

// exceptionFor reads an exception the reviewer may see, writing the problem if not.
func (s *Server) exceptionFor(w http.ResponseWriter, r *http.Request, rv records.Reviewer, via string) (records.ExceptionDetail, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.notFound(w, r, via, fmt.Sprintf("%q is not an exception id: ids are whole numbers", r.PathValue("id")))
		return records.ExceptionDetail{}, false
	}
	d, err := s.Store.ExceptionDetail(r.Context(), id)
	if errors.Is(err, records.ErrNotFound) {
		s.notFound(w, r, via, noException(id))
		return d, false
	}
	if err != nil {
		if via == records.ViaConsole {
			s.consoleInternal(w, r, err)
		} else {
			s.internal(w, r, err)
		}
		return d, false
	}
	if !records.InScope(rv.Partners, d.PartnerID) {
		s.denied(w, r, rv, via, id, d.PartnerID)
		return d, false
	}
	return d, true
}

// noException is the answer for an exception id that does not exist, or
// that the reviewer may not see: the two are told apart by nobody.
func noException(id int64) string { return fmt.Sprintf("there is no exception %d", id) }

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, via, detail string) {
	if via == records.ViaConsole {
		s.consoleError(w, r, http.StatusNotFound, detail)
		return
	}
	writeProblem(w, r, http.StatusNotFound, "not_found", "No such exception", detail, nil)
}

// denied answers a reviewer acting outside their partners, and audits the
// refusal with the partner. The answer tells nothing of other partners: for
// one exception (id != 0) it is the very 404 of an exception that does not
// exist (neither its existence nor its partner is told); for a partner the
// reviewer named (a filter, a bulk body, a dispatch page) it is 403 listing
// only the reviewer's own partners, the same whether that partner exists or
// not.
func (s *Server) denied(w http.ResponseWriter, r *http.Request, rv records.Reviewer, via string, id int64, partner string) {
	s.audit(r.Context(), records.AuditEntry{Actor: rv.Name, Via: via, Action: "denied", ExceptionID: id, PartnerID: partner,
		Detail: r.Method + " " + r.URL.Path})
	if id != 0 {
		s.notFound(w, r, via, noException(id))
		return
	}
	detail := fmt.Sprintf("you may review only partner(s) %s; the partner asked for is not one of them", strings.Join(rv.Partners, ", "))
	if via == records.ViaConsole {
		s.consoleError(w, r, http.StatusForbidden, detail)
		return
	}
	writeProblem(w, r, http.StatusForbidden, "forbidden", "Not your partner", detail, nil)
}

func (s *Server) apiShow(w http.ResponseWriter, r *http.Request, rv records.Reviewer) {
	if d, ok := s.exceptionFor(w, r, rv, records.ViaAPI); ok {
		writeJSON(w, http.StatusOK, d)
	}
}

// readBody decodes an optional JSON body into v with the one strict
// decoder (strictjson: a member repeated in any case, or unknown, is
// refused; a misspelt filter must not widen a bulk decision); when it
// cannot, it has answered with a problem and returns false. The content
// type is checked before the body is read: a refused body is never waited
// for.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any, example string) bool {
	if r.ContentLength == 0 {
		return true
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeProblem(w, r, http.StatusUnsupportedMediaType, "bad_request", "JSON body expected",
			"send Content-Type: application/json with a body like "+example, nil)
		return false
	}
	raw, err := httpbody.ReadAll(w, r, s.bodyLimits(64<<10))
	var mbe *http.MaxBytesError
	switch {
	case httpbody.TimedOut(err):
		writeProblem(w, r, http.StatusRequestTimeout, "body_timeout", "Body too slow",
			fmt.Sprintf("the body did not arrive within %s (or slower than %d bytes a second); nothing was decided: send it again", s.bodyLimits(0).Timeout, s.bodyLimits(0).MinRate), nil)
		return false
	case errors.As(err, &mbe):
		writeProblem(w, r, http.StatusRequestEntityTooLarge, "body_too_large", "Body too large",
			fmt.Sprintf("the body is larger than %d bytes; send a body like %s", mbe.Limit, example), nil)
		return false
	case err != nil:
		writeProblem(w, r, http.StatusBadRequest, "bad_request", "Unreadable body", err.Error(), nil)
		return false
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return true
	}
	if err := strictjson.Unmarshal(raw, v); err != nil {
		var se *strictjson.Error
		errors.As(err, &se)
		switch {
		case errors.Is(err, strictjson.ErrDuplicate):
			writeProblem(w, r, http.StatusUnprocessableEntity, "duplicate_key", "Duplicate JSON member",
				se.Error()+" (nothing was decided)", map[string]any{"field": se.Member})
		case errors.Is(err, strictjson.ErrUnknown):
			writeProblem(w, r, http.StatusUnprocessableEntity, "unknown_member", "Unknown JSON member",
				fmt.Sprintf("%s; nothing was decided: send a body like %s", se.Error(), example), map[string]any{"field": se.Member})
		default:
			writeProblem(w, r, http.StatusBadRequest, "bad_request", "Malformed JSON body",
				fmt.Sprintf("the body is not JSON like %s: %v", example, err), nil)
		}
		return false
	}
	return true
}

// bodyLimits are the limits of a body of at most max bytes.
func (s *Server) bodyLimits(limit int64) httpbody.Limits {
	l := s.Body
	l.Max = limit
	if l.Timeout <= 0 {
		l.Timeout = httpbody.DefaultTimeout
	}
	if l.MinRate <= 0 {
		l.MinRate = httpbody.DefaultMinRate
	}
	return l
}

// bulkBody is the body of POST /v1/review/bulk/{approve,reject}.
type bulkBody struct {
	Partner   string `json:"partner"`
	Period    string `json:"period"`
	File      string `json:"file"`
	Code      string `json:"code"`
	Component string `json:"component"`
	Employee  string `json:"employee"`
	MinChange string `json:"min_change"`
	MaxChange string `json:"max_change"`
	Note      string `json:"note"`
	DryRun    bool   `json:"dry_run"`
	// AsComponent approves the rows held for their component code as
	// this component (component is the filter: the code they were sent with).
	AsComponent string `json:"as_component"`
}

func (b bulkBody) filter() records.ExceptionFilter {
	return records.ExceptionFilter{Partner: b.Partner, Period: b.Period, File: b.File, Code: normalize.Code(b.Code),
		Component: b.Component, Employee: b.Employee, MinChange: b.MinChange, MaxChange: b.MaxChange}
}

// bulkAnswer is the answer of a bulk decision, in the API and the console.
type bulkAnswer struct {
	Status      string                   `json:"status"`
	DryRun      bool                     `json:"dry_run"`
	Matched     int                      `json:"matched"`
	TotalChange []records.CurrencyAmount `json:"total_change"`
	Decided     int                      `json:"decided"`
	Refused     []records.Refusal        `json:"refused"`
}

// decideAll summarises a bulk decision and, unless dryRun, makes it.
func (s *Server) decideAll(r *http.Request, b records.BulkDecision, dryRun bool) (bulkAnswer, error) {
	ans := bulkAnswer{Status: records.ExceptionRejected, DryRun: dryRun, Refused: []records.Refusal{}}
	if b.Approve {
		ans.Status = records.ExceptionApproved
	}
	sum, err := s.Store.Summarize(r.Context(), b)
	if err != nil {
		return ans, err
	}
	ans.Matched, ans.TotalChange = sum.Count, sum.TotalChange
	if dryRun {
		return ans, nil
	}
	res, err := s.Store.DecideAll(r.Context(), b)
	ans.Decided, ans.Refused = res.Decided, res.Refused
	if err != nil {
		return ans, err
	}
	s.Log.InfoContext(r.Context(), "review: bulk decision", "partner", b.Filter.Partner, "status", res.Status,
		"decided", res.Decided, "refused", len(res.Refused), "batches", res.Batches, "reviewer", b.Reviewer, "via", b.Via)
	return ans, nil
}

func (s *Server) apiBulk(approve bool) func(http.ResponseWriter, *http.Request, records.Reviewer) {
	return func(w http.ResponseWriter, r *http.Request, rv records.Reviewer) {
		var body bulkBody
		if !s.readBody(w, r, &body, `{"partner": "acme", "file": "late.csv", "note": "why", "dry_run": true}`) {
			return
		}
		if body.Partner == "" {
			writeProblem(w, r, http.StatusBadRequest, "bad_request", "Partner required",
				`a bulk decision decides the open exceptions of one partner: send {"partner": "ID", ...}`, nil)
			return
		}
		if !records.InScope(rv.Partners, body.Partner) {
			s.denied(w, r, rv, records.ViaAPI, 0, body.Partner)
			return
		}
		if err := body.filter().Check(); err != nil {
			writeProblem(w, r, http.StatusBadRequest, "bad_request", "Bad filter", err.Error(), nil)
			return
		}
		ans, err := s.decideAll(r, records.BulkDecision{Filter: body.filter(), Approve: approve, Reviewer: rv.Name,
			Note: body.Note, Via: records.ViaAPI, Partners: rv.Partners, AsComponent: body.AsComponent}, body.DryRun)
		if errors.Is(err, records.ErrComponent) {
			writeProblem(w, r, http.StatusUnprocessableEntity, "component", "Component does not fit", err.Error(), nil)
			return
		}
		if err != nil {
			s.internal(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, ans)
	}
}

func (s *Server) apiDecide(approve bool) func(http.ResponseWriter, *http.Request, records.Reviewer) {
	return func(w http.ResponseWriter, r *http.Request, rv records.Reviewer) {
		var body struct {
			Note        string `json:"note"`
			AsComponent string `json:"as_component"`
		}
		if !s.readBody(w, r, &body, `{"note": "why"}`) {
			return
		}
		d, ok := s.exceptionFor(w, r, rv, records.ViaAPI)
		if !ok {
			return
		}
		x, err := s.Store.Decide(r.Context(), records.Decision{ExceptionID: d.ID, Approve: approve, Reviewer: rv.Name,
			Note: body.Note, Via: records.ViaAPI, Partners: rv.Partners, AsComponent: body.AsComponent})
		if err != nil {
			s.decisionProblem(w, r, rv, d, err)
			return
		}
		s.Log.InfoContext(r.Context(), "review: exception decided", "exception", x.ID, "status", x.Status, "reviewer", rv.Name, "via", "api")
		writeJSON(w, http.StatusOK, x)
	}
}

func (s *Server) decisionProblem(w http.ResponseWriter, r *http.Request, rv records.Reviewer, d records.ExceptionDetail, err error) {
	var de *records.DecidedError
	var se *records.StaleError
	switch {
	case errors.As(err, &de):
		extra := map[string]any{"exception_id": de.ID, "exception_status": de.Status}
		if de.By != "" {
			extra["decided_by"] = de.By
		}
		if !de.At.IsZero() {
			extra["decided_at"] = de.At.UTC().Format(time.RFC3339)
		}
		if de.SupersededBy != 0 {
			extra["superseded_by"] = de.SupersededBy
		}
		writeProblem(w, r, http.StatusConflict, "already_decided", "Exception already decided", de.Error(), extra)
	case errors.As(err, &se):
		writeProblem(w, r, http.StatusConflict, "stale", "Record changed since the exception was raised", se.Error(),
			map[string]any{"exception_id": se.ID, "record_id": se.RecordID})
	case errors.Is(err, records.ErrComponent):
		writeProblem(w, r, http.StatusUnprocessableEntity, "component", "Component does not fit", err.Error(),
			map[string]any{"exception_id": d.ID})
	case errors.Is(err, records.ErrForbidden):
		s.denied(w, r, rv, records.ViaAPI, d.ID, d.PartnerID)
	case errors.Is(err, records.ErrNotFound):
		s.notFound(w, r, records.ViaAPI, noException(d.ID))
	default:
		s.internal(w, r, err)
	}
}
