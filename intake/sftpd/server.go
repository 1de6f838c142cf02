package sftpd

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/records"
)

// SFTP drop zone defaults.
const (
	DefaultMaxFileSize      = 1 << 30 // 1 GiB
	defaultLoginDelay       = 250 * time.Millisecond
	defaultMaxLoginDelay    = 15 * time.Second
	defaultHandshakeTimeout = 30 * time.Second
	loginFailureWindow      = 15 * time.Minute
	maxChannelsPerConn      = 4
	maxUploadsPerSession    = 16
)

// Config configures the drop zone.
type Config struct {
	Store *records.Store
	// Intake is what complete uploads are submitted to (Intake.Submit);
	// nil: one on Store, with Log.
	Intake *intake.Intake
	// HostKeys are the keys the server starts with (EnsureHostKeys).
	HostKeys *HostKeys
	// HostKeyRefresh is how often the host keys are read again from Store,
	// so that a rotation reaches a running server; 0: never.
	HostKeyRefresh time.Duration
	// LegacyAlgorithms adds the weak algorithms old clients need: key
	// exchange diffie-hellman-group14-sha1, MACs hmac-sha1 and hmac-sha1-96,
	// and SHA-1 ssh-rsa signatures by the RSA host key.
	LegacyAlgorithms bool
	// HostKeyTypes limits the host keys served to these SSH key formats
	// (all are still announced); nil: every active key. For partners whose
	// client pins one key but would pick another type.
	HostKeyTypes []string
	// Auth checks a partner's allowed client addresses (nil: a Checker on
	// Store, its refusals counted nowhere).
	Auth *partnerauth.Checker
	// SpoolDir holds the bytes of uploads while a handle on this server
	// writes them (never a partner-chosen name: spool files are named by
	// the server); what a handle leaves unfinished is stored in the
	// database.
	SpoolDir string
	// MaxFileSize bounds one upload; writes beyond it fail. 0 means DefaultMaxFileSize.
	MaxFileSize int64
	// Enqueue runs in the transaction that records an envelope and schedules
	// its processing (Queue.Enqueue).
	Enqueue records.AfterInsert
	Metrics *Metrics
	Log     *slog.Logger
	// LoginDelay is the wait imposed on a source address after its first
	// failed login; it doubles with each further failure up to MaxLoginDelay.
	LoginDelay, MaxLoginDelay time.Duration
	// HandshakeTimeout bounds key exchange plus authentication.
	HandshakeTimeout time.Duration
	// ResumeWindow is how long an upload not received yet (cut off, or
	// temp-named and never renamed) is kept after its last write so that its
	// partner can resume or rename it from any connection to any server on
	// the database; then it is discarded. 0 means DefaultResumeWindow.
	ResumeWindow time.Duration
	// Checkpoint is how often an upload being written stores what it has
	// received so far, so that a resume after this server dies (killed, or
	// its machine lost) on any other loses at most about this much of the
	// transfer; an upload shorter than it is stored only when it ends. 0
	// means DefaultCheckpoint; negative: never (only when the handle ends).
	Checkpoint time.Duration
	// InboxWindow is how long a received file stays visible in /inbox (stat,
	// listing) after it arrived. 0 means DefaultInboxWindow.
	InboxWindow time.Duration
	// IdleTimeout closes a logged-in connection on which nothing has been
	// sent or received for this long while the server is not working for it.
	// 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxSessions bounds the logged-in connections of one partner to this
	// server; more are refused at login with a message. 0 means
	// DefaultMaxSessions.
	MaxSessions int
	// Now is the clock the login gate measures a silent connection's age
	// by (nil: time.Now); tests move it instead of waiting.
	Now func() time.Time
}

// Defaults of the session bounds.
const (
	DefaultIdleTimeout = 10 * time.Minute
	DefaultMaxSessions = 32
)

// DefaultInboxWindow is how long /inbox shows a received file.
const DefaultInboxWindow = 7 * 24 * time.Hour

// Server is the partners' SFTP drop zone: /inbox to upload, /results to
// download. Everything a partner sees comes from the database, so several
// servers on one database show the same.
type Server struct {
	cfg     Config
	log     *slog.Logger
	m       *Metrics
	limiter *loginLimiter
	gate    *loginGate

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	// Drain's state: the listener Serve takes connections from, whether a
	// drain has begun, and the logged-in connections (by their raw
	// connection), whose open uploads it waits for.
	ln       net.Listener
	draining bool
	live     map[net.Conn]*idleConn

	// id names this server (process) as the writer of the uploads it
	// writes (records.Upload leases).
	id string

	// imu guards inbox: per partner, per name, the files being written on
	// this server. Lock order: imu before a pending's mu.
	imu   sync.Mutex
	inbox map[string]map[string]*pending

	smu      sync.Mutex
	sessions map[string]int // logged-in connections per partner

	hostKeys atomic.Pointer[HostKeys]
}

// New checks cfg and prepares the spool folder.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.HostKeys == nil || len(cfg.HostKeys.Active) == 0 || cfg.SpoolDir == "" {
		return nil, errors.New("sftp server: Store, HostKeys and SpoolDir are required")
	}
	if len(cfg.HostKeys.served(cfg.HostKeyTypes)) == 0 {
		return nil, fmt.Errorf("sftp server: no active host key of the types %v", cfg.HostKeyTypes)
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.LoginDelay <= 0 {
		cfg.LoginDelay = defaultLoginDelay
	}
	if cfg.MaxLoginDelay <= 0 {
		cfg.MaxLoginDelay = defaultMaxLoginDelay
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = defaultHandshakeTimeout
	}
	if cfg.ResumeWindow <= 0 {
		cfg.ResumeWindow = DefaultResumeWindow
	}
	if cfg.Checkpoint == 0 {
		cfg.Checkpoint = DefaultCheckpoint
	}
	if cfg.InboxWindow <= 0 {
		cfg.InboxWindow = DefaultInboxWindow
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Intake == nil {
		cfg.Intake = intake.New(cfg.Store, cfg.Log)
	}
	if cfg.Auth == nil {
		cfg.Auth = partnerauth.New(cfg.Store)
	}
	if err := os.MkdirAll(cfg.SpoolDir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool folder: %w", err)
	}
	host, _ := os.Hostname()
	tag := make([]byte, 6)
	_, _ = rand.Read(tag)
	s := &Server{
		cfg: cfg, log: cfg.Log, m: cfg.Metrics, id: fmt.Sprintf("%s/%d/%x", host, os.Getpid(), tag),
		limiter: &loginLimiter{base: cfg.LoginDelay, max: cfg.MaxLoginDelay, window: loginFailureWindow,
			m: map[string]*failures{}},
		gate:     newLoginGate(cfg.Now, func(reason string) { cfg.Metrics.loginsClosed.WithLabelValues(reason).Inc() }),
		conns:    map[net.Conn]struct{}{},
		live:     map[net.Conn]*idleConn{},
		inbox:    map[string]map[string]*pending{},
		sessions: map[string]int{},
	}
	s.hostKeys.Store(cfg.HostKeys)
	return s, nil
}

// CleanSpool removes spool files older than age, left by a process that
// died mid-upload (such uploads were never received).
func CleanSpool(dir string, age time.Duration) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && !e.IsDir() && time.Since(info.ModTime()) > age {
			_ = os.Remove(dir + string(os.PathSeparator) + e.Name())
		}
	}
}

// Serve accepts connections on ln until ctx is done (Drain stops it taking
// new ones earlier), then closes every connection (uploads still open are
// recorded as incomplete and stored, to be resumed on any server) and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer s.shutdown()
	s.mu.Lock()
	s.ln = ln
	draining := s.draining
	s.mu.Unlock()
	if draining {
		ln.Close()
	}
	go s.sweepEvery(ctx, min(s.cfg.ResumeWindow/4, time.Minute))
	if s.cfg.HostKeyRefresh > 0 {
		go every(ctx, s.cfg.HostKeyRefresh, func(time.Time) bool { s.refreshHostKeys(ctx); return true })
	}
	go every(ctx, uploadLease/3, func(time.Time) bool { s.renewLeases(ctx); return true })
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.mu.Lock()
			draining := s.draining
			s.mu.Unlock()
			if draining {
				// Connections still open end by themselves (Drain) or at
				// the end of ctx.
				<-ctx.Done()
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("sftp accept: %w", err)
			}
			// Descriptors run out (EMFILE, ENFILE), a connection aborted
			// before it was taken, a timeout: none is the end of the
			// server. Back off (as net/http does) and accept again once
			// connections have gone.
			if backoff == 0 {
				s.log.Warn("sftp accept failed; retrying with backoff", "err", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.handleConn(ctx, c)
		}()
	}
}

// drainQuiet is how long a connection with no upload open must have sent
// and received nothing before a drain closes it: the answer to an upload's
// close goes out just after the upload is stored.
const drainQuiet = 250 * time.Millisecond

// Drain stops taking connections and waits, until every connection has
// ended or ctx is done, for the uploads in flight to end: a connection is
// closed once no upload is open on it, no close is being stored, and it
// has been quiet for drainQuiet (connections still logging in are closed
// at once). The client of a
// connection closed between two files sees it closed and connects again,
// to another server. Serve's ctx then closes what is left (uploads still
// open are stored, to be resumed on any server).
func (s *Server) Drain(ctx context.Context) {
	s.mu.Lock()
	s.draining = true
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Unlock()
	s.log.Info("draining: no new connections; waiting for the uploads in flight")
	idleNow := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.conns {
			if ic := s.live[c]; ic == nil || (ic.uploads.Load() == 0 && ic.busy.Load() == 0 &&
				time.Since(time.Unix(0, ic.last.Load())) > drainQuiet) {
				c.Close()
			}
		}
		return len(s.conns) == 0
	}
	if idleNow() {
		return
	}
	every(ctx, 20*time.Millisecond, func(time.Time) bool { return !idleNow() })
}

// sweepEvery discards expired unfinished uploads until ctx is done.
func (s *Server) sweepEvery(ctx context.Context, d time.Duration) {
	every(ctx, d, func(now time.Time) bool { s.sweep(ctx, now); return true })
}

// every calls f every d (at least 10ms) until ctx is done or f returns false.
func every(ctx context.Context, d time.Duration, f func(now time.Time) bool) {
	t := time.NewTicker(max(d, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if !f(now) {
				return
			}
		}
	}
}

// shutdown closes every connection (each upload open stores what it has
// for a resume, on any server) and drops what is left in the spool.
func (s *Server) shutdown() {
	defer func() {
		s.imu.Lock()
		defer s.imu.Unlock()
		for _, files := range s.inbox {
			for _, p := range files {
				_ = os.Remove(p.spool)
			}
		}
		clear(s.inbox)
	}()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Extensions carried from authentication to the session.
const (
	extPartner = "payintake-partner"
	extKey     = "payintake-key"
)

// authState is what one connection's authentication attempts left behind.
type authState struct {
	ip       string
	addr     netip.Addr // the client's, as ip
	mu       sync.Mutex
	user     string
	delay    time.Duration
	failures int
	// unavailable: a login refused only because keys could not be checked.
	unavailable bool
	// capped: a login refused because the partner has MaxSessions already.
	capped bool
	// session: the partner whose session slot this connection holds.
	session string
	offered []string
	lastErr error
}

var errKeyNotAllowed = errors.New("public key not authorised for this partner")

// errAddressNotAllowed is a proven key used from a client address outside
// its partner's allowlist: to the client, a failed login like any other.
var errAddressNotAllowed = errors.New("client address not in the partner's allow-from")

// errKeyCheckUnavailable is a login refused because the key could not be
// looked up (the database is unreachable). It is not the partner's fault: it
// is not counted as a failed login, and the client is told why.
var errKeyCheckUnavailable = errors.New("key check unavailable")

// keyCheckUnavailable is errKeyCheckUnavailable as the client is told it.
var keyCheckUnavailable = &ssh.BannerError{Err: errKeyCheckUnavailable,
	Message: "payintake cannot check keys right now (its database is unreachable); nothing was received: try again in a minute\n"}

// errTooManySessions is a login refused because the partner already has
// MaxSessions connections to this server.
var errTooManySessions = errors.New("too many sessions")

// takeSession reserves one of the partner's session slots.
func (s *Server) takeSession(partner string) bool {
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.sessions[partner] >= s.cfg.MaxSessions {
		return false
	}
	s.sessions[partner]++
	return true
}

func (s *Server) releaseSession(partner string) {
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.sessions[partner]--; s.sessions[partner] <= 0 {
		delete(s.sessions, partner)
	}
}

func (s *Server) serverConfig(ctx context.Context, st *authState) *ssh.ServerConfig {
	check := func(user, fp string) error {
		if !records.ValidPartnerID(user) {
			// Malformed input (invalid UTF-8, odd characters, too long) is an
			// unknown partner: the same answer and delay, no database call.
			return errKeyNotAllowed
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ok, err := s.cfg.Store.KeyAllowed(cctx, user, fp)
		if err != nil {
			s.log.Error("check partner key", "partner", user, "key", fp, "err", err)
			return keyCheckUnavailable
		}
		if !ok {
			return errKeyNotAllowed
		}
		return nil
	}
	cfg := &ssh.ServerConfig{
		ServerVersion: serverVersion,
		MaxAuthTries:  6,
		// Only filters offered keys, so a client with several keys does not
		// sign with ones that cannot work. Nothing is granted here.
		PublicKeyCallback: func(c ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			fp := ssh.FingerprintSHA256(key)
			st.mu.Lock()
			if len(st.offered) < 8 {
				st.offered = append(st.offered, fp)
			}
			st.mu.Unlock()
			if err := check(c.User(), fp); err != nil {
				return nil, err
			}
			return &ssh.Permissions{Extensions: map[string]string{extKey: fp}}, nil
		},
		// The decision: the client has proven it holds the private key, and the
		// key is looked up again now (so a key revoked a moment ago is refused).
		VerifiedPublicKeyCallback: func(c ssh.ConnMetadata, key ssh.PublicKey, perms *ssh.Permissions, _ string) (*ssh.Permissions, error) {
			fp := ssh.FingerprintSHA256(key)
			if perms == nil || perms.Extensions[extKey] != fp {
				return nil, errKeyNotAllowed
			}
			if err := check(c.User(), fp); err != nil {
				return nil, err
			}
			// The allowlist is checked once the key is proven, not when it
			// is offered: a public key is no secret, and a refusal writes
			// an audit row, which only a holder of the private key may
			// cause. (Such a holder can tell, from a verbose client, that
			// the key was accepted before the login failed.)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			allowed, err := s.cfg.Auth.AllowedFrom(cctx, c.User(), partnerauth.DoorSFTP, st.addr)
			cancel()
			if err != nil {
				s.log.Error("check partner's allowed addresses", "partner", c.User(), "remote", st.ip, "err", err)
				return nil, keyCheckUnavailable
			}
			if !allowed {
				return nil, fmt.Errorf("%w: %s", errAddressNotAllowed, st.ip)
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			if st.session == "" {
				if !s.takeSession(c.User()) {
					return nil, &ssh.BannerError{Err: errTooManySessions,
						Message: fmt.Sprintf("payintake: partner %s already has %d sessions open on this server (the most allowed); nothing was received: close some (or lower your client's parallel connections) and try again\n", c.User(), s.cfg.MaxSessions)}
				}
				st.session = c.User()
			}
			perms.Extensions[extPartner] = c.User()
			return perms, nil
		},
		AuthLogCallback: func(c ssh.ConnMetadata, method string, err error) {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.user = c.User()
			if errors.Is(err, errKeyCheckUnavailable) {
				st.unavailable = true
				return
			}
			if errors.Is(err, errTooManySessions) {
				st.capped = true
				return
			}
			if err == nil || method == "none" {
				return
			}
			st.failures++
			st.lastErr = fmt.Errorf("%s: %w", method, err)
			// Each failure is answered late; the wait grows with the failures
			// from this address (counted once per connection).
			if st.failures == 1 {
				st.delay = s.limiter.delayFor(s.limiter.fail(st.ip))
			}
			d := st.delay
			st.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			st.mu.Lock()
		},
	}
	s.setAlgorithms(cfg)
	return cfg
}

func newConnID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) handleConn(ctx context.Context, c net.Conn) {
	// The client's address (behind a trusted proxy, its PROXY header's) is
	// what every bound, limit, allowlist and log line below counts.
	client, proxy, err := clientaddr.Client(c)
	log := s.log.With("conn", newConnID(), "remote", client.String())
	if proxy.IsValid() {
		log = log.With("proxy", proxy.String())
	}
	if err != nil {
		s.m.loginsClosed.WithLabelValues("proxy_header").Inc()
		log.Warn("connection refused", "err", err)
		return
	}
	ip := client.Addr().String()
	bc := newBannerConn(c)
	if err := s.gate.hello(bc, ip); err != nil {
		if errors.Is(err, clientaddr.ErrRefused) {
			log.Warn("connection refused", "err", err)
			return
		}
		log.Debug("connection closed before it sent anything")
		return
	}
	if !s.gate.enter(ctx, ip) {
		log.Warn("too many connections logging in at once from this address (or in all) for too long; closed")
		return
	}
	entered := true
	leave := func() {
		if entered {
			s.gate.leave(ip)
			entered = false
		}
	}
	defer leave()
	st := &authState{ip: ip, addr: client.Addr()}
	defer func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.session != "" {
			s.releaseSession(st.session)
		}
	}()
	ic := &idleConn{}
	ic.touch()
	kex := bc.peekKexInit()
	_ = c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	cfg := s.serverConfig(ctx, st)
	cfg.Ciphers = ciphersFor(kex)
	sconn, chans, reqs, err := ssh.NewServerConn(bc, cfg)
	if err != nil {
		st.mu.Lock()
		failed, offered, last, user, unavailable, capped := st.failures, st.offered, st.lastErr, st.user, st.unavailable, st.capped
		st.mu.Unlock()
		if capped && failed == 0 {
			s.m.logins.WithLabelValues("too_many_sessions").Inc()
			log.Warn("login refused: the partner has the most sessions allowed open", "user", user, "max_sessions", s.cfg.MaxSessions)
		} else if unavailable && failed == 0 {
			s.m.logins.WithLabelValues("unavailable").Inc()
			log.Warn("login refused: partner keys cannot be checked (database unreachable)", "user", user)
		} else if failed > 0 {
			s.m.logins.WithLabelValues("failed").Inc()
			log.Warn("login failed", "user", user, "offered_keys", offered, "reason", errString(last),
				"failed_attempts", failed, "failures_from_address", s.limiter.count(ip))
		} else {
			log.Debug("connection closed before login", "err", err)
		}
		return
	}
	_ = c.SetDeadline(time.Time{})
	defer sconn.Close()
	s.limiter.ok(ip)
	leave()
	partner, fp := sconn.Permissions.Extensions[extPartner], sconn.Permissions.Extensions[extKey]
	if partner == "" || partner != sconn.User() {
		log.Error("login without a verified partner key; closing")
		return
	}
	log = log.With("door", "sftp", "partner", partner, "key", fp)
	s.m.logins.WithLabelValues("ok").Inc()
	s.m.sessions.Inc()
	defer s.m.sessions.Dec()
	start := time.Now()
	log.Info("logged in", "client", string(sconn.ClientVersion()))
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.live[c] = ic
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.live, c)
		s.mu.Unlock()
	}()
	go s.closeWhenIdle(connCtx, ic, sconn, log)
	keys := s.hostKeys.Load()
	global := s.serveGlobalRequests(reqs, sconn.Conn, keys, log)
	s.announceHostKeys(sconn, keys, log)
	var wg sync.WaitGroup
	var channels atomic.Int32 // open at once
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels are served")
			continue
		}
		if channels.Load() >= maxChannelsPerConn {
			_ = nc.Reject(ssh.ResourceShortage, "too many sessions open on one connection")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			log.Warn("accept session channel", "err", err)
			continue
		}
		channels.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer channels.Add(-1)
			s.session(connCtx, ch, creqs, partner, ic, global, log)
		}()
	}
	wg.Wait()
	log.Info("logged out", "duration", time.Since(start).Round(time.Millisecond))
}

func errString(err error) string {
	if err == nil {
		return "no key offered"
	}
	return err.Error()
}

// session serves one SSH session channel: the sftp subsystem and nothing else.
func (s *Server) session(ctx context.Context, ch ssh.Channel, reqs <-chan *ssh.Request, partner string, ic *idleConn, global *globalRequests, log *slog.Logger) {
	defer ch.Close()
	started := false
	done := make(chan struct{})
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				if started {
					<-done
				}
				return
			}
			if req.Type == "subsystem" && !started && subsystemName(req.Payload) == "sftp" {
				started = true
				_ = req.Reply(true, nil)
				go func() {
					defer close(done)
					s.serveSFTP(ctx, ch, partner, ic, global, log)
				}()
				continue
			}
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
			if req.Type == "exec" || req.Type == "shell" {
				_, _ = io.WriteString(ch.Stderr(), "payintake: this server offers SFTP only (use sftp, not ssh)\r\n")
			}
		case <-done:
			return
		}
	}
}

func subsystemName(payload []byte) string {
	if len(payload) < 4 {
		return ""
	}
	n := binary.BigEndian.Uint32(payload)
	if uint64(n) > uint64(len(payload)-4) {
		return ""
	}
	return string(payload[4 : 4+n])
}

// serveSFTP serves the sftp subsystem on ch until the client ends it, then
// closes ch: answers still owed to the client first, then its exit status.
func (s *Server) serveSFTP(ctx context.Context, ch ssh.Channel, partner string, ic *idleConn, global *globalRequests, log *slog.Logger) {
	fs := newPartnerFS(ctx, s, partner, log)
	fs.conn = ic
	h := sftp.Handlers{FileGet: fs, FilePut: fs, FileCmd: fs, FileList: fs}
	// Not pkg/sftp's allocator (WithRSAllocator): its buffers are 256 KiB
	// each, whatever a request's size, and stay with the session until it
	// ends, so a session that once pipelined writes keeps many of them
	// while idle; a buffer a request is garbage once answered
	// (docs/decisions.md).
	rs := sftp.NewRequestServer(ic.channel(ch), h, sftp.WithStartDirectory("/"+dirInbox))
	log.Info("sftp session started")
	err := rs.Serve()
	if err != nil && !errors.Is(err, io.EOF) {
		log.Info("sftp session ended", "err", err)
	} else {
		log.Info("sftp session ended")
	}
	global.settle(ctx)
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
	// Closes ch.
	_ = rs.Close()
}

// idleConn notes when SFTP bytes last went either way on a connection's
// sessions, and how many operations the server is working on for it
// (storing a file before answering its close): a connection is idle only
// when both are quiet. Only the SFTP channels' data counts: SSH traffic of
// its own (keepalive requests, window adjustments, channel requests) keeps
// the TCP connection up, not the session.
type idleConn struct {
	last atomic.Int64 // unix nanoseconds
	busy atomic.Int32
	// uploads counts the upload handles open on the connection (a drain
	// waits for them).
	uploads atomic.Int32
}

func (c *idleConn) touch() { c.last.Store(time.Now().UnixNano()) }

// channelReadBuffer is how much of an SFTP channel's data one read takes.
// x/crypto/ssh grants the client more window at every Read once more than
// three packets wait unread (as they do while an upload streams), so the
// SFTP server's reads, two a packet (its length, then its body), cost two
// SSH packets back each, encrypted and written one by one; a read of all
// that waits, up to this much, costs one.
const channelReadBuffer = 64 << 10

// channel is ch, noting its data as activity, its reads buffered.
func (c *idleConn) channel(ch ssh.Channel) io.ReadWriteCloser {
	a := activeChannel{ch, c}
	return struct {
		io.Reader
		io.Writer
		io.Closer
	}{bufio.NewReaderSize(a, channelReadBuffer), a, a}
}

type activeChannel struct {
	ssh.Channel
	ic *idleConn
}

func (a activeChannel) Read(p []byte) (int, error) {
	n, err := a.Channel.Read(p)
	if n > 0 {
		a.ic.touch()
	}
	return n, err
}

func (a activeChannel) Write(p []byte) (int, error) {
	n, err := a.Channel.Write(p)
	if n > 0 {
		a.ic.touch()
	}
	return n, err
}

// working marks the server busy for the connection until the returned
// function is called.
func (c *idleConn) working() func() {
	if c == nil {
		return func() {}
	}
	c.busy.Add(1)
	return func() { c.touch(); c.busy.Add(-1) }
}

// closeWhenIdle closes the connection once it has been idle for
// IdleTimeout (uploads left open are then cut off, kept to be resumed).
func (s *Server) closeWhenIdle(ctx context.Context, ic *idleConn, sconn *ssh.ServerConn, log *slog.Logger) {
	limit := s.cfg.IdleTimeout
	every(ctx, limit/8, func(now time.Time) bool {
		if ic.busy.Load() > 0 || now.Sub(time.Unix(0, ic.last.Load())) < limit {
			return true
		}
		s.m.idleClosed.Inc()
		log.Info("connection closed: idle", "idle_timeout", limit)
		_ = sconn.Close()
		return false
	})
}

// loginLimiter slows down logins from addresses that recently failed: each
// failed attempt is answered after LoginDelay, doubled for every connection
// from the address that failed within the window, at most MaxLoginDelay.
// (How many connections may be logging in at once is the loginGate's.)
type loginLimiter struct {
	mu     sync.Mutex
	base   time.Duration
	max    time.Duration
	window time.Duration
	m      map[string]*failures
}

type failures struct {
	n    int
	last time.Time
}

func (l *loginLimiter) delayFor(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := l.base
	for i := 1; i < n && d < l.max; i++ {
		d *= 2
	}
	return min(d, l.max)
}

func (l *loginLimiter) count(ip string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.m[ip]; f != nil {
		return f.n
	}
	return 0
}

// fail counts a failed login from ip and returns the recent failures.
func (l *loginLimiter) fail(ip string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if len(l.m) > 10000 {
		for k, f := range l.m {
			if now.Sub(f.last) > l.window {
				delete(l.m, k)
			}
		}
	}
	f := l.m[ip]
	if f == nil || now.Sub(f.last) > l.window {
		f = &failures{}
		l.m[ip] = f
	}
	f.n++
	f.last = now
	return f.n
}

func (l *loginLimiter) ok(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, ip)
}
