package review

// The web console, under /review/:
//
//	GET  /review/login, POST /review/login, POST /review/logout
//	GET  /review/queue?status=&partner=&period=&employee=&file=&code=&component=&min_change=&max_change=&after=
//	                                                     the queue, with counts per status, 50 a page
//	GET  /review/bulk?action=approve|reject&partner=&... confirm a bulk decision: count and total change
//	POST /review/bulk                                    make it (action, the filters, expect, note, csrf)
//	GET  /review/exceptions/{id}                         locked vs proposed, decision form, history, audit
//	POST /review/exceptions/{id}/decide                  action=approve|reject, note, csrf
//	GET  /review/static/style.css

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/internal/httpbody"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

//go:embed templates/*.html static/*
var assets embed.FS

const cookieName = "payintake_review"

var funcs = template.FuncMap{
	"money": func(m map[string]string) string {
		if m == nil {
			return "—"
		}
		return m["amount"] + " " + m["currency"]
	},
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"whenp": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"join": strings.Join,
	"codeText": func(code normalize.Code) string {
		switch code {
		case normalize.CodeRecordLocked:
			return "record locked"
		case normalize.CodePeriodLocked:
			return "period closed"
		case normalize.CodeUnknownEmployee:
			return "employee not onboarded"
		case normalize.CodeUnknownComponent:
			return "component code not mapped"
		}
		return string(code)
	},
	"heldWhy": func(code normalize.Code) string {
		switch code {
		case normalize.CodeRecordLocked:
			return "the record is locked"
		case normalize.CodePeriodLocked:
			return "the pay period is closed"
		case normalize.CodeUnknownEmployee:
			return "the employee is not onboarded (approving onboards them with the employee_id shown)"
		case normalize.CodeUnknownComponent:
			return "the partner's profile does not map its component code (approving needs the component the code means)"
		}
		return string(code)
	},
	"change": func(c records.CurrencyAmount) string {
		if strings.HasPrefix(c.Amount, "-") {
			return "−" + c.Amount[1:] + " " + c.Currency
		}
		return "+" + c.Amount + " " + c.Currency
	},
	"dash": func(s string) string {
		if s == "" {
			return "—"
		}
		return s
	},
}

var pages = func() map[string]*template.Template {
	m := map[string]*template.Template{}
	for _, name := range []string{"login", "queue", "exception", "error", "bulk", "dispatch", "preview"} {
		m[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html"))
	}
	return m
}()

// page is what every console template gets; V holds the page's own view.
type page struct {
	Title    string
	Reviewer string
	Scope    string
	CSRF     string
	Flash    string
	Error    string
	V        any
}

func (s *Server) routesConsole(mux *http.ServeMux) {
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET /review/static/", http.StripPrefix("/review/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /review/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/review/queue", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /review/login", s.loginPage)
	mux.HandleFunc("POST /review/login", s.loginPost)
	mux.HandleFunc("POST /review/logout", s.authConsole(s.logout))
	mux.HandleFunc("GET /review/queue", s.authConsole(s.queuePage))
	mux.HandleFunc("GET /review/exceptions/{id}", s.authConsole(s.exceptionPage))
	mux.HandleFunc("GET /review/exceptions/{id}/file", s.authConsole(s.receivedFile))
	mux.HandleFunc("POST /review/exceptions/{id}/decide", s.authConsole(s.decidePost))
	mux.HandleFunc("GET /review/bulk", s.authConsole(s.bulkPage))
	mux.HandleFunc("GET /review/preview", s.authConsole(s.previewPage))
	mux.HandleFunc("POST /review/preview", s.authConsoleUpTo(sampleMax, sampleTooLarge(), s.previewPost))
	mux.HandleFunc("POST /review/bulk", s.authConsole(s.bulkPost))
	s.routesDispatch(mux)
	mux.HandleFunc("/review/", func(w http.ResponseWriter, r *http.Request) {
		s.consoleError(w, r, http.StatusNotFound, "There is no such page in the review console.")
	})
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	if err := pages[name].ExecuteTemplate(w, "layout", p); err != nil {
		s.Log.ErrorContext(r.Context(), "review console: render", "page", name, "err", err)
	}
}

func (s *Server) consoleError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := page{Title: http.StatusText(status), Error: msg}
	if sess, ok := r.Context().Value(sessionKey{}).(records.Session); ok {
		p.Reviewer, p.CSRF, p.Scope = sess.Reviewer.Name, sess.CSRFToken, strings.Join(sess.Reviewer.Partners, ", ")
	}
	s.render(w, r, status, "error", p)
}

func (s *Server) consoleInternal(w http.ResponseWriter, r *http.Request, err error) {
	s.Log.ErrorContext(r.Context(), "review console", "path", r.URL.Path, "err", err)
	s.consoleError(w, r, http.StatusInternalServerError, "Something went wrong on the server; try again, and tell the operator if it persists.")
}

type sessionKey struct{}

func (s *Server) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: cookieName, Value: value, Path: "/review", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.SecureCookies || clientaddr.HTTPS(r)}
}

// formMax bounds a console form that carries no file: a decision's note,
// a bulk decision's filters.
const formMax = 64 << 10

// authConsole requires a console session; on POST it also requires the
// session's CSRF token in the form.
func (s *Server) authConsole(h func(http.ResponseWriter, *http.Request, records.Session)) http.HandlerFunc {
	return s.authConsoleUpTo(formMax, fmt.Sprintf("The form is larger than the %d KiB the console reads: shorten the note and send it again.", formMax>>10), h)
}

// authConsoleUpTo is authConsole for a form of at most limit bytes;
// tooLarge is what a reviewer whose form is larger is told (413).
func (s *Server) authConsoleUpTo(limit int64, tooLarge string, h func(http.ResponseWriter, *http.Request, records.Session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var sess records.Session
		c, err := r.Cookie(cookieName)
		if err == nil && c.Value != "" {
			sess, err = s.Store.SessionByToken(r.Context(), tokenHash(c.Value), "console")
		} else {
			err = records.ErrNotFound
		}
		if errors.Is(err, records.ErrNotFound) {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/review/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.render(w, r, http.StatusUnauthorized, "login", page{Title: "Log in",
				Error: "Your session has ended: log in again, then repeat what you were doing.", V: loginView{}})
			return
		}
		if err != nil {
			s.consoleInternal(w, r, err)
			return
		}
		r = r.WithContext(contextWith(r, sess))
		if r.Method == http.MethodPost {
			if !s.readForm(w, r, s.bodyLimits(limit), tooLarge) {
				return
			}
			got := r.PostFormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRFToken)) != 1 || got == "" {
				s.audit(r.Context(), records.AuditEntry{Actor: sess.Reviewer.Name, Via: records.ViaConsole, Action: "denied",
					Detail: "CSRF token missing or wrong: " + r.Method + " " + r.URL.Path})
				s.consoleError(w, r, http.StatusForbidden, "This form is out of date or was not sent from the console (CSRF check failed). Reload the page and try again.")
				return
			}
		}
		h(w, r, sess)
	}
}

// readForm reads a console form (URL-encoded or multipart) under l before
// anything in it is looked at, so that a form cut off by its limit is
// answered as such and not as one without its CSRF token: 413 with
// tooLarge whether the size was declared or found as a chunked body
// arrived, 408 for a form too slow, 400 for one unreadable. When it has
// answered it returns false.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request, l httpbody.Limits, tooLarge string) bool {
	r.Body = httpbody.Reader(w, r, l)
	// ParseForm first, on its own: ParseMultipartForm drops its error for
	// a form that is not multipart. It reads a URL-encoded body and leaves
	// a multipart one, whose parts are then kept in memory up to the
	// form's own limit (a form the limit admits never spills to a file).
	err := r.ParseForm()
	if err == nil {
		if err = r.ParseMultipartForm(l.Max); errors.Is(err, http.ErrNotMultipart) {
			err = nil
		}
	}
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &mbe):
		s.consoleError(w, r, http.StatusRequestEntityTooLarge, tooLarge)
	case httpbody.TimedOut(err):
		s.consoleError(w, r, http.StatusRequestTimeout, "The form arrived too slowly and was cut off; nothing was done. Send it again.")
	default:
		// A malformed body (a bad escape, a broken multipart boundary):
		// the reviewer sees a plain message, the operator the cause.
		s.Log.InfoContext(r.Context(), "review console: form unreadable", "path", r.URL.Path, "err", err)
		s.consoleError(w, r, http.StatusBadRequest, "The form could not be read; nothing was done. Reload the page and try again.")
	}
	return false
}

type loginView struct{ Name, Next string }

func safeNext(next string) string {
	if strings.HasPrefix(next, "/review/") && !strings.HasPrefix(next, "//") && !strings.Contains(next, "\\") {
		return next
	}
	return "/review/queue"
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "Log in", V: loginView{Next: safeNext(r.URL.Query().Get("next"))}}
	if r.URL.Query().Get("bye") != "" {
		p.Flash = "You are logged out."
	}
	s.render(w, r, http.StatusOK, "login", p)
}

// loginMax bounds a login form: a name, a password and where to go next.
const loginMax = 16 << 10

func (s *Server) loginPost(w http.ResponseWriter, r *http.Request) {
	// A login form is small: it arrives within LoginReadTimeout or the
	// connection is dropped, so stalled logins hold nothing for long.
	if !s.readForm(w, r, httpbody.Limits{Max: loginMax, Timeout: s.LoginReadTimeout},
		fmt.Sprintf("The login form is larger than the %d KiB a name and password need: open the login page and try again.", loginMax>>10)) {
		return
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	next := safeNext(r.PostFormValue("next"))
	rv, err := s.login(r.Context(), name, r.PostFormValue("password"), clientAddress(r), records.ViaConsole, true)
	if errors.Is(err, errBadCredentials) {
		s.render(w, r, http.StatusUnauthorized, "login", page{Title: "Log in",
			Error: "Wrong name or password.", V: loginView{Name: name, Next: next}})
		return
	}
	var le *lockedError
	if errors.As(err, &le) {
		w.Header().Set("Retry-After", retryAfter(err))
		s.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Log in",
			Error: "Too many failed logins for this name or from this address. Wait " + retryAfter(err) +
				" seconds and try again, or ask an operator to unlock your account.", V: loginView{Name: name, Next: next}})
		return
	}
	if errors.Is(err, errBusy) {
		w.Header().Set("Retry-After", retryAfter(err))
		s.render(w, r, http.StatusServiceUnavailable, "login", page{Title: "Log in",
			Error: "The server is busy checking other logins. Try again in a moment.", V: loginView{Name: name, Next: next}})
		return
	}
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	tok, _, _, err := s.newSession(r.Context(), rv.Name, "console")
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	http.SetCookie(w, s.cookie(r, tok, int(s.SessionTTL/time.Second)))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, sess records.Session) {
	if c, err := r.Cookie(cookieName); err == nil {
		if err := s.Store.DeleteSession(r.Context(), tokenHash(c.Value)); err != nil {
			s.consoleInternal(w, r, err)
			return
		}
	}
	s.audit(r.Context(), records.AuditEntry{Actor: sess.Reviewer.Name, Via: records.ViaConsole, Action: "logout"})
	http.SetCookie(w, s.cookie(r, "", -1))
	http.Redirect(w, r, "/review/login?bye=1", http.StatusSeeOther)
}

func basePage(sess records.Session, title string) page {
	return page{Title: title, Reviewer: sess.Reviewer.Name, CSRF: sess.CSRFToken, Scope: strings.Join(sess.Reviewer.Partners, ", ")}
}

type tab struct {
	Label, URL string
	Count      int
	Active     bool
}

type queueView struct {
	Status   string
	F        records.ExceptionFilter
	Filtered bool
	Partners []string
	Codes    []normalize.Code
	Tabs     []tab
	Items    []records.Exception
	Next     string
	FirstURL string
	First    bool
	Open     int // open exceptions matching the filters
	Approve  string
	Reject   string
}

// consoleFilter reads the queue's filters from a query or a form.
func consoleFilter(q url.Values) records.ExceptionFilter {
	return records.ExceptionFilter{Partner: q.Get("partner"), Period: strings.ToUpper(strings.TrimSpace(q.Get("period"))),
		Employee: strings.TrimSpace(q.Get("employee")), File: strings.TrimSpace(q.Get("file")), Code: normalize.Code(q.Get("code")),
		Component: strings.ToUpper(strings.TrimSpace(q.Get("component"))),
		MinChange: strings.TrimSpace(q.Get("min_change")), MaxChange: strings.TrimSpace(q.Get("max_change"))}
}

// filterValues is the inverse of consoleFilter: the non-empty filters.
func filterValues(f records.ExceptionFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"partner": f.Partner, "period": f.Period, "employee": f.Employee, "file": f.File,
		"code": string(f.Code), "component": f.Component, "min_change": f.MinChange, "max_change": f.MaxChange} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func queueURL(status string, f records.ExceptionFilter, after int64) string {
	q := filterValues(f)
	q.Set("status", status)
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	return "/review/queue?" + q.Encode()
}

func bulkURL(action string, f records.ExceptionFilter) string {
	q := filterValues(f)
	q.Set("action", action)
	return "/review/bulk?" + q.Encode()
}

func (s *Server) queuePage(w http.ResponseWriter, r *http.Request, sess records.Session) {
	q := r.URL.Query()
	v := queueView{Status: q.Get("status"), F: consoleFilter(q), Codes: normalize.ExceptionCodes()}
	v.Filtered = len(filterValues(v.F)) > 0
	if v.Status == "" {
		v.Status = records.ExceptionOpen
	}
	switch v.Status {
	case records.ExceptionOpen, records.ExceptionApproved, records.ExceptionRejected, records.ExceptionSuperseded, "all":
	default:
		s.consoleError(w, r, http.StatusBadRequest, fmt.Sprintf("Unknown status %q: choose open, approved, rejected, superseded or all.", v.Status))
		return
	}
	if err := v.F.Check(); err != nil {
		s.consoleError(w, r, http.StatusBadRequest, "Bad filter: "+err.Error()+".")
		return
	}
	if v.F.Partner != "" && !records.InScope(sess.Reviewer.Partners, v.F.Partner) {
		s.denied(w, r, sess.Reviewer, records.ViaConsole, 0, v.F.Partner)
		return
	}
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	v.First = after == 0
	v.FirstURL = queueURL(v.Status, v.F, 0)
	f := v.F
	f.Scope, f.AfterID, f.Limit = sess.Reviewer.Partners, after, defaultPageSize+1
	if v.Status != "all" {
		f.Status = v.Status
	}
	ctx := r.Context()
	items, err := s.Store.Exceptions(ctx, f)
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	if len(items) > defaultPageSize {
		items = items[:defaultPageSize]
		v.Next = queueURL(v.Status, v.F, items[len(items)-1].ID)
	}
	v.Items = items
	counts, err := s.Store.ExceptionCounts(ctx, f)
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	for _, st := range []string{records.ExceptionOpen, records.ExceptionApproved, records.ExceptionRejected, records.ExceptionSuperseded, "all"} {
		v.Tabs = append(v.Tabs, tab{Label: st, URL: queueURL(st, v.F, 0), Count: counts[st], Active: st == v.Status})
	}
	v.Open = counts[records.ExceptionOpen]
	v.Approve, v.Reject = bulkURL("approve", v.F), bulkURL("reject", v.F)
	if len(sess.Reviewer.Partners) > 0 {
		v.Partners = sess.Reviewer.Partners
	} else {
		ps, err := s.Store.Partners(ctx)
		if err != nil {
			s.consoleInternal(w, r, err)
			return
		}
		for _, p := range ps {
			v.Partners = append(v.Partners, p.ID)
		}
	}
	p := basePage(sess, "Queue")
	p.V = v
	s.render(w, r, http.StatusOK, "queue", p)
}

type bulkView struct {
	Action string // approve, reject
	F      records.ExceptionFilter
	Hidden map[string]string // the filters, as hidden form fields
	Sum    records.Summary
	Note   string
	// AsComponent: the component rows held for their component code are
	// approved as (records.BulkDecision.AsComponent).
	AsComponent string
	Done        *bulkAnswer
	QueueURL    string
}

// bulkRequest reads a bulk decision's action and filter; when they are not
// usable it has answered and returns false.
func (s *Server) bulkRequest(w http.ResponseWriter, r *http.Request, sess records.Session, q url.Values) (bulkView, records.BulkDecision, bool) {
	v := bulkView{Action: q.Get("action"), F: consoleFilter(q), Hidden: map[string]string{}}
	for k, vals := range filterValues(v.F) {
		v.Hidden[k] = vals[0]
	}
	v.QueueURL = queueURL(records.ExceptionOpen, v.F, 0)
	b := records.BulkDecision{Filter: v.F, Approve: v.Action == "approve", Reviewer: sess.Reviewer.Name,
		Via: records.ViaConsole, Partners: sess.Reviewer.Partners}
	switch {
	case v.Action != "approve" && v.Action != "reject":
		s.consoleError(w, r, http.StatusBadRequest, "Choose Approve all or Reject all from the queue.")
	case v.F.Partner == "":
		s.consoleError(w, r, http.StatusBadRequest, "Choose a partner in the queue first: a bulk decision decides the open exceptions of one partner.")
	case !records.InScope(sess.Reviewer.Partners, v.F.Partner):
		s.denied(w, r, sess.Reviewer, records.ViaConsole, 0, v.F.Partner)
	case v.F.Check() != nil:
		s.consoleError(w, r, http.StatusBadRequest, "Bad filter: "+v.F.Check().Error()+".")
	default:
		sum, err := s.Store.Summarize(r.Context(), b)
		if err != nil {
			s.consoleInternal(w, r, err)
			return v, b, false
		}
		v.Sum = sum
		return v, b, true
	}
	return v, b, false
}

func (s *Server) bulkPage(w http.ResponseWriter, r *http.Request, sess records.Session) {
	v, _, ok := s.bulkRequest(w, r, sess, r.URL.Query())
	if !ok {
		return
	}
	p := basePage(sess, "Confirm "+v.Action)
	p.V = v
	s.render(w, r, http.StatusOK, "bulk", p)
}

func (s *Server) bulkPost(w http.ResponseWriter, r *http.Request, sess records.Session) {
	// authConsole has read the form (r.PostForm).
	v, b, ok := s.bulkRequest(w, r, sess, r.PostForm)
	if !ok {
		return
	}
	v.Note, v.AsComponent = r.PostFormValue("note"), r.PostFormValue("as_component")
	b.Note = v.Note
	if b.Approve {
		b.AsComponent = v.AsComponent
	}
	p := basePage(sess, "Confirm "+v.Action)
	// The set must be the one the reviewer confirmed: files may have arrived,
	// or others decided, since the confirm page was shown.
	if expect := r.PostFormValue("expect"); expect != strconv.Itoa(v.Sum.Count) {
		p.Error = fmt.Sprintf("The matching exceptions changed since you opened this page (%s then, %d now). Check the new count and total, and confirm again.", expect, v.Sum.Count)
		p.V = v
		s.render(w, r, http.StatusConflict, "bulk", p)
		return
	}
	ans, err := s.decideAll(r, b, false)
	if errors.Is(err, records.ErrComponent) {
		p.Error = err.Error()
		p.V = v
		s.render(w, r, http.StatusUnprocessableEntity, "bulk", p)
		return
	}
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	v.Done = &ans
	p.Title = "Bulk decision"
	p.Flash = fmt.Sprintf("You %s %d exception(s) of partner %s.", ans.Status, ans.Decided, v.F.Partner)
	if len(ans.Refused) > 0 {
		p.Error = fmt.Sprintf("%d exception(s) could not be %s and stay open; they are listed below.", len(ans.Refused), ans.Status)
	}
	p.V = v
	s.render(w, r, http.StatusOK, "bulk", p)
}

type fieldRow struct {
	Name, Current, Proposed string
	Differs                 bool
}

type exceptionView struct {
	D      records.ExceptionDetail
	Fields []fieldRow
	Audit  []records.AuditEntry
	Note   string
	// AsComponent is what the reviewer typed as the component a held
	// code means, kept when the page comes back with an error.
	AsComponent string
	// PGP is how the file came, when it came as OpenPGP: encrypted to
	// which platform key, signed by which partner key (nil: plain).
	PGP *records.EnvelopePGP
	// Profile is the partner profile version the file was read with
	// (nil: none).
	Profile *records.PartnerProfile
}

func (s *Server) exceptionView(w http.ResponseWriter, r *http.Request, sess records.Session) (exceptionView, bool) {
	d, ok := s.exceptionFor(w, r, sess.Reviewer, records.ViaConsole)
	if !ok {
		return exceptionView{}, false
	}
	v := exceptionView{D: d}
	for _, f := range normalize.FieldNames {
		row := fieldRow{Name: f, Proposed: d.Proposed[f], Current: "—"}
		if d.Current != nil {
			row.Current = d.Current[f]
		}
		for _, df := range d.Differing {
			row.Differs = row.Differs || df == f
		}
		v.Fields = append(v.Fields, row)
	}
	a, err := s.Store.AuditLog(r.Context(), d.ID, 50)
	if err != nil {
		s.consoleInternal(w, r, err)
		return v, false
	}
	v.Audit = a
	if pg, ok, err := s.Store.EnvelopePGP(r.Context(), d.EnvelopeID); err != nil {
		s.consoleInternal(w, r, err)
		return v, false
	} else if ok {
		v.PGP = &pg
	}
	if v.Profile, err = s.envelopeProfile(r, d.EnvelopeID); err != nil {
		s.consoleInternal(w, r, err)
		return v, false
	}
	return v, true
}

func (s *Server) exceptionPage(w http.ResponseWriter, r *http.Request, sess records.Session) {
	v, ok := s.exceptionView(w, r, sess)
	if !ok {
		return
	}
	p := basePage(sess, fmt.Sprintf("Exception %d", v.D.ID))
	if r.URL.Query().Get("decided") != "" && v.D.Status != records.ExceptionOpen && v.D.DecidedBy == sess.Reviewer.Name {
		p.Flash = fmt.Sprintf("You %s exception %d.", v.D.Status, v.D.ID)
	}
	p.V = v
	s.render(w, r, http.StatusOK, "exception", p)
}

// receivedFile sends the file an exception's row came from, byte for byte
// as it was received (the bytes kept for audit), for the reviewer to open
// beside the exception. Content-Length is the size received: a read that
// fails midway (a chunk missing) ends the connection, so the browser fails
// the download instead of saving a shorter file.
func (s *Server) receivedFile(w http.ResponseWriter, r *http.Request, sess records.Session) {
	d, ok := s.exceptionFor(w, r, sess.Reviewer, records.ViaConsole)
	if !ok {
		return
	}
	env, err := s.Store.Envelope(r.Context(), d.EnvelopeID)
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": env.FileName}))
	h.Set("Content-Length", strconv.FormatInt(env.Size, 10))
	h.Set("X-Content-Type-Options", "nosniff")
	if _, err := io.Copy(w, s.Store.EnvelopeBytes(r.Context(), env.ID)); err != nil {
		s.Log.ErrorContext(r.Context(), "review console: received file", "exception", d.ID, "envelope", env.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) decidePost(w http.ResponseWriter, r *http.Request, sess records.Session) {
	action := r.PostFormValue("action")
	if action != "approve" && action != "reject" {
		s.consoleError(w, r, http.StatusBadRequest, "Choose Approve or Reject.")
		return
	}
	note := r.PostFormValue("note")
	v, ok := s.exceptionView(w, r, sess)
	if !ok {
		return
	}
	// The component a held code means: given to an approval only (the
	// form sends the field with either button).
	as := ""
	if action == "approve" {
		as = r.PostFormValue("as_component")
	}
	x, err := s.Store.Decide(r.Context(), records.Decision{ExceptionID: v.D.ID, Approve: action == "approve",
		Reviewer: sess.Reviewer.Name, Note: note, Via: records.ViaConsole, Partners: sess.Reviewer.Partners, AsComponent: as})
	var de *records.DecidedError
	var se *records.StaleError
	var ce *records.ComponentError
	switch {
	case err == nil:
		s.Log.InfoContext(r.Context(), "review: exception decided", "exception", x.ID, "status", x.Status,
			"reviewer", sess.Reviewer.Name, "via", "console")
		http.Redirect(w, r, fmt.Sprintf("/review/exceptions/%d?decided=1", x.ID), http.StatusSeeOther)
	case errors.As(err, &de), errors.As(err, &se), errors.As(err, &ce):
		if v2, ok := s.exceptionView(w, r, sess); ok {
			v = v2
		} else {
			return
		}
		v.Note, v.AsComponent = note, as
		p := basePage(sess, fmt.Sprintf("Exception %d", v.D.ID))
		p.Error = err.Error()
		p.V = v
		status := http.StatusConflict
		if ce != nil {
			status = http.StatusUnprocessableEntity
		}
		s.render(w, r, status, "exception", p)
	case errors.Is(err, records.ErrForbidden):
		s.denied(w, r, sess.Reviewer, records.ViaConsole, v.D.ID, v.D.PartnerID)
	default:
		s.consoleInternal(w, r, err)
	}
}

func contextWith(r *http.Request, sess records.Session) context.Context {
	return context.WithValue(r.Context(), sessionKey{}, sess)
}
