// Package review is the reviewers' side of payintake: a JSON API under
// /v1/review/ and a server-rendered web console under /review/, on the same
// HTTP address as the rest of the server. Reviewers decide the exceptions
// (held changes to locked records or closed periods) that package records
// keeps; every decision goes through records.Store.Decide.
//
// Authentication:
//
//   - Accounts are made with `payintake reviewer add NAME`; passwords are
//     hashed with argon2id (PHC string in reviewers.password_hash).
//   - The console logs in with a form and keeps a session cookie
//     (payintake_review: random 256-bit token, only its SHA-256 stored;
//     HttpOnly, SameSite=Strict, Path=/review, Secure when the client's
//     connection is HTTPS — direct TLS, or a trusted proxy's word
//     (clientaddr.HTTPS) — or with SecureCookies; 12 hours).
//   - The API takes `Authorization: Bearer TOKEN` (a token from
//     POST /v1/review/token, 12 hours) or HTTP Basic with the reviewer's name
//     and password. It never reads the console cookie, so a browser's
//     ambient credentials cannot drive it.
//
// CSRF: every console form carries the session's CSRF token in a hidden
// field, checked on POST; cookies are SameSite=Strict; and the whole handler
// runs behind net/http.CrossOriginProtection, which refuses cross-origin
// browser POSTs (Sec-Fetch-Site / Origin).
//
// Authorisation: a reviewer added with --partners sees and decides only those
// partners' exceptions (403 otherwise). Every decision, login, failed login
// and refusal is written to review_audit.
package review

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/internal/httpbody"
	"github.com/payintake/payintake/records"
)

// Server serves the review API and console.
type Server struct {
	Store *records.Store
	Log   *slog.Logger
	// SessionTTL is how long a console session or API token lasts.
	SessionTTL time.Duration
	// SecureCookies marks the session cookie Secure even on plain HTTP
	// requests. HTTPS requests always get it, also through a trusted
	// TLS-terminating proxy that says so (clientaddr.HTTPS).
	SecureCookies bool
	// LoginReadTimeout bounds the reading of a console login form (10 s).
	LoginReadTimeout time.Duration
	// Body bounds the reading of the API's JSON bodies and the console's
	// forms (Max is each one's own; zero: httpbody's defaults).
	Body httpbody.Limits

	handler http.Handler
	// hashing holds one token per password check that may run at once.
	hashing chan struct{}
}

// Password checks are costly on purpose (argon2id: 19 MiB and tens of
// milliseconds each), so they are rationed: at most hashSlots run at once
// in a process, whoever asks (known names, unknown names, console, API), and
// a login that cannot get a slot within hashWait is answered 503 with
// Retry-After. Memory so stays bounded however many logins arrive at once.
const (
	hashSlots = 2
	hashWait  = 2 * time.Second
)

// errBusy: every password-check slot stayed taken for hashWait.
var errBusy = errors.New("too many logins at once")

// lockedError: the account name or the client address is locked after
// failed logins, until Until.
type lockedError struct{ Until time.Time }

func (e *lockedError) Error() string { return "locked after failed logins" }

// retryAfter is the Retry-After value (whole seconds, at least 1) for a
// login refused with errBusy or a *lockedError.
func retryAfter(err error) string {
	var le *lockedError
	if errors.As(err, &le) {
		return strconv.Itoa(max(1, int(math.Ceil(time.Until(le.Until).Seconds()))))
	}
	return "1"
}

// clientAddress is the address failed logins are counted against: the
// client's (behind a trusted proxy, the one it forwarded; clientaddr).
func clientAddress(r *http.Request) string {
	if a := clientaddr.From(r); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}

// New returns a Server on store.
func New(store *records.Store, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{Store: store, Log: log, SessionTTL: 12 * time.Hour, LoginReadTimeout: 10 * time.Second, hashing: make(chan struct{}, hashSlots)}
	mux := http.NewServeMux()
	s.routesAPI(mux)
	s.routesConsole(mux)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Log.WarnContext(r.Context(), "review: cross-origin request refused", "path", r.URL.Path,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			writeProblem(w, r, http.StatusForbidden, "cross_origin", "Cross-origin request refused",
				"this request came from another web site; send it from the payintake console or from a non-browser client", nil)
			return
		}
		http.Error(w, "Cross-origin request refused: this form was sent from another web site. Open the payintake console directly and try again.", http.StatusForbidden)
	}))
	// Guard: a request refused before its body is read (no session, not
	// the reviewer's partner, a wrong content type) is answered at once and
	// its connection closed, without waiting for the body.
	s.handler = httpbody.Guard(cop.Handler(mux))
	return s
}

// Mount registers the review API (/v1/review/) and console (/review/) on mux.
func Mount(mux *http.ServeMux, store *records.Store, log *slog.Logger) *Server {
	s := New(store, log)
	mux.Handle("/v1/review/", s)
	mux.Handle("/review/", s)
	mux.Handle("/review", http.RedirectHandler("/review/", http.StatusSeeOther))
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	s.handler.ServeHTTP(w, r)
}

func tokenHash(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

var errBadCredentials = errors.New("wrong reviewer name or password")

// login checks a reviewer's name and password, taking as long for an
// unknown name as for a wrong password. Failures are always audited;
// successes when auditOK (a console login or a token, not every Basic-auth
// API call).
func (s *Server) login(ctx context.Context, name, password, address, via string, auditOK bool) (records.Reviewer, error) {
	var rv records.Reviewer
	// A locked name or address is refused before any password is checked,
	// so a storm of guesses costs one small query each.
	until, err := s.Store.LoginLockedUntil(ctx, name, address)
	if err != nil {
		return rv, err
	}
	if !until.IsZero() {
		s.audit(ctx, records.AuditEntry{Actor: name, Via: via, Action: "login_locked", Detail: address})
		return rv, &lockedError{Until: until}
	}
	wait, cancel := context.WithTimeout(ctx, hashWait)
	defer cancel()
	select {
	case s.hashing <- struct{}{}:
	case <-wait.Done():
		return rv, errBusy
	}
	rv, hash, err := s.Store.ReviewerByName(ctx, name)
	if err != nil && !errors.Is(err, records.ErrNotFound) {
		<-s.hashing
		return rv, err
	}
	if errors.Is(err, records.ErrNotFound) {
		hash = dummyHash // an unknown name costs what a known one does
	}
	ok, cerr := CheckPassword(hash, password)
	<-s.hashing
	if cerr != nil {
		return rv, cerr
	}
	if err != nil || !ok {
		s.audit(ctx, records.AuditEntry{Actor: name, Via: via, Action: "login_failed", Detail: address})
		if _, ferr := s.Store.RecordLoginFailure(ctx, name, address); ferr != nil {
			return rv, ferr
		}
		return rv, errBadCredentials
	}
	if err := s.Store.ClearLoginFailures(ctx, name, address); err != nil {
		return rv, err
	}
	if auditOK {
		s.audit(ctx, records.AuditEntry{Actor: name, Via: via, Action: "login"})
	}
	return rv, nil
}

// newSession stores a session for reviewer and returns its token.
func (s *Server) newSession(ctx context.Context, reviewer, kind string) (tok, csrf string, expires time.Time, err error) {
	tok, h := newToken()
	csrf, _ = newToken()
	expires = time.Now().Add(s.SessionTTL)
	err = s.Store.CreateSession(ctx, h, reviewer, kind, csrf, expires)
	return tok, csrf, expires, err
}

func (s *Server) audit(ctx context.Context, e records.AuditEntry) {
	if err := s.Store.Audit(ctx, e); err != nil {
		s.Log.ErrorContext(ctx, "review: audit", "err", err, "action", e.Action, "actor", e.Actor)
	}
}
