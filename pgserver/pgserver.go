// Package pgserver runs payintake's private, embedded PostgreSQL cluster.
//
// The cluster lives in DATA_DIR/postgres and is created on first use with
// the PostgreSQL server binaries installed on the machine (see FindBinDir).
// It listens on a Unix socket only (listen_addresses is empty): the socket is
// placed in the cluster directory itself, or, when that path would exceed
// the 107-byte limit of a Unix socket path, in a private directory
// os.TempDir()/payintake-pg-<hash of the cluster path> (mode 0700, owned by
// the cluster's account).
//
// Authentication is "trust" for local connections (initdb --auth=trust):
// there is no TCP listener and the socket sits in a directory only the
// cluster's account (and root) can enter, so only those can connect. Clients
// connect as the superuser "postgres".
//
// PostgreSQL refuses to run as root. When payintake runs as root, the
// binaries are run as the `postgres` system user and the cluster directory
// is owned by it; every directory above the cluster must then be
// traversable by that user. Start adds the search bit for others (o+x, not
// read) to the data dir itself when payintake owns it; for any other
// directory on the path it fails with a clear error.
//
// Several processes may use one cluster. Start and Stop serialize on an
// exclusive flock of DATA_DIR/postgres.lock; each Server holds a shared
// flock on DATA_DIR/postgres.users for its lifetime. Stop shuts the cluster
// down (fast mode) only when no other Server holds the users file, and only
// when the cluster was started by payintake (this Server or another one that
// has since finished, as recorded in DATA_DIR/postgres.owner), never a
// cluster someone started by hand.
//
// The PostgreSQL binaries, and so the postmaster, inherit only stdin,
// stdout and stderr: never a descriptor this process was given (a lock
// held by `flock LOCKFILE command` would otherwise stay held by the
// cluster for as long as it runs).
//
// Files in DATA_DIR: postgres/ (the cluster, with server.log and the
// generated payintake.conf), postgres.lock, postgres.users, postgres.owner.
package pgserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/jackc/pgerrcode"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultDatabase is the database Start creates and URL points to.
const DefaultDatabase = "payintake"

// superuser is the role initdb creates and clients connect as.
const superuser = "postgres"

// port is the (socket-only) port number; the socket file is .s.PGSQL.5432.
const port = 5432

// maxSocketPath is the longest Unix socket path the kernel accepts
// (sizeof(sun_path) - 1).
const maxSocketPath = 107

// Timeouts for the slow steps.
const (
	pgCtlTimeout = 60 * time.Second
	readyTimeout = 30 * time.Second
)

// Options configures Start.
type Options struct {
	DataDir string       // the payintake data dir; the cluster lives in DataDir/postgres
	Logger  *slog.Logger // may be nil

	// FallbackDir is where the cluster lives instead when payintake runs as
	// root and the cluster's account cannot enter DataDir (a data dir under
	// /root, say): FallbackDir/<hash of DataDir>/postgres, named in
	// DataDir/postgres.location. Empty means DefaultFallbackDir.
	FallbackDir string
}

// DefaultFallbackDir is Options.FallbackDir's default.
const DefaultFallbackDir = "/var/lib/payintake"

// Server is a handle on the running embedded cluster. It is safe for
// concurrent use.
type Server struct {
	log     *slog.Logger
	run     runner
	dataDir string
	dir     string // the cluster (PGDATA)
	host    string // socket directory
	port    int
	started bool // this Server started the postmaster

	mu    sync.Mutex
	users *os.File // shared flock on postgres.users; nil once stopped
}

// paths of the files Start and Stop share.
func lockPath(dataDir string) string  { return filepath.Join(dataDir, "postgres.lock") }
func usersPath(dataDir string) string { return filepath.Join(dataDir, "postgres.users") }
func ownerPath(dataDir string) string { return filepath.Join(dataDir, "postgres.owner") }

// Start makes sure the cluster in opts.DataDir/postgres exists and runs, and
// returns a handle. It initializes the cluster on first use, starts it when
// it is not running, and otherwise connects to the running one. It creates
// database "payintake" if missing. It is safe when several processes call it
// at once. Call Stop when done.
func Start(ctx context.Context, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.DataDir == "" {
		return nil, errors.New("start embedded PostgreSQL: no data dir given")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("start embedded PostgreSQL: %w", err)
	}
	binDir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	id, err := serverIdentity()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	clusterDir, err := placeCluster(dataDir, opts.FallbackDir, id, log)
	if err != nil {
		return nil, err
	}
	s := &Server{
		log:     log.With("component", "pgserver"),
		run:     runner{binDir: binDir, id: id},
		dataDir: dataDir,
		dir:     clusterDir,
		port:    port,
	}
	lock, err := flockFile(ctx, lockPath(dataDir), syscall.LOCK_EX)
	if err != nil {
		return nil, fmt.Errorf("start embedded PostgreSQL: %w", err)
	}
	defer lock.Close()

	if err := s.startLocked(ctx); err != nil {
		if s.started {
			// Do not leave behind a half-working cluster we started.
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgCtlTimeout)
			if _, _, err := s.run.run(stopCtx, "pg_ctl", "stop", "-D", s.dir, "-m", "fast", "-w", "-t", "60", "-s"); err != nil {
				s.log.Warn("could not stop the cluster after a failed start", "err", err)
			}
			cancel()
		}
		if s.users != nil {
			s.users.Close()
			s.users = nil
		}
		return nil, err
	}
	return s, nil
}

// startLocked does Start's work while holding postgres.lock.
func (s *Server) startLocked(ctx context.Context) error {
	version, err := s.binaryVersion(ctx)
	if err != nil {
		return err
	}
	if err := s.ensureCluster(ctx, version); err != nil {
		return err
	}
	running, err := s.isRunning(ctx)
	if err != nil {
		return err
	}
	if running {
		s.log.Debug("embedded PostgreSQL already running", "dir", s.dir)
	} else {
		if err := s.startPostmaster(ctx); err != nil {
			return err
		}
	}
	pid, err := readPostmasterPID(s.dir)
	if err != nil {
		return fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	if pid.socketDir != "" {
		s.host = pid.socketDir
	}
	if s.host == "" {
		return fmt.Errorf("embedded PostgreSQL in %s is running without a Unix socket (postmaster.pid names none)", s.dir)
	}
	if pid.port != 0 {
		s.port = pid.port
	}
	if s.started {
		if err := os.WriteFile(ownerPath(s.dataDir), []byte(strconv.Itoa(pid.pid)+"\n"), 0o600); err != nil {
			return fmt.Errorf("record cluster owner: %w", err)
		}
	}
	// Become a user before letting go of the start lock, so a concurrent
	// Stop cannot shut the cluster down under us.
	users, err := flockFile(ctx, usersPath(s.dataDir), syscall.LOCK_SH)
	if err != nil {
		return fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	s.users = users
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	return s.ensureDatabase(ctx, DefaultDatabase)
}

// binaryVersion returns the major version of the binaries ("15").
func (s *Server) binaryVersion(ctx context.Context) (string, error) {
	out, _, err := s.run.run(ctx, "pg_ctl", "--version")
	if err != nil {
		return "", fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	// "pg_ctl (PostgreSQL) 15.10 (Debian 15.10-1.pgdg120+1)"
	_, rest, ok := strings.Cut(out, "(PostgreSQL) ")
	if !ok {
		return "", fmt.Errorf("embedded PostgreSQL: cannot read version from %q", out)
	}
	v := strings.Fields(rest)[0]
	if major, _, ok := strings.Cut(v, "."); ok && major != "9" {
		v = major
	}
	return strings.TrimRightFunc(v, func(r rune) bool { return r < '0' || r > '9' }), nil
}

// ensureCluster initializes the cluster if the directory does not exist (or
// is empty) and checks an existing one.
func (s *Server) ensureCluster(ctx context.Context, version string) error {
	fi, err := os.Stat(s.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s.initCluster(ctx, version)
	case err != nil:
		return fmt.Errorf("embedded PostgreSQL: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("embedded PostgreSQL: %s exists but is not a directory; move it away or choose another data dir", s.dir)
	}
	raw, err := os.ReadFile(filepath.Join(s.dir, "PG_VERSION"))
	if errors.Is(err, os.ErrNotExist) {
		entries, rerr := os.ReadDir(s.dir)
		if rerr == nil && len(entries) == 0 {
			if err := os.Remove(s.dir); err != nil {
				return fmt.Errorf("embedded PostgreSQL: %w", err)
			}
			return s.initCluster(ctx, version)
		}
		return fmt.Errorf("embedded PostgreSQL: %s exists but is not a PostgreSQL cluster (no PG_VERSION file); move it away or choose another data dir", s.dir)
	}
	if err != nil {
		return fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	if have := strings.TrimSpace(string(raw)); have != version {
		return fmt.Errorf("embedded PostgreSQL: the cluster in %s was created by PostgreSQL %s but the binaries in %s are version %s; install PostgreSQL %s or point %s to its binaries", s.dir, have, s.run.binDir, version, have, BinDirEnv)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && s.run.id.cred != nil && int(st.Uid) != s.run.id.uid {
		return fmt.Errorf("embedded PostgreSQL: %s is owned by uid %d, not by the %s user (uid %d) that runs the cluster; fix with `chown -R %s %s`", s.dir, st.Uid, s.run.id.name, s.run.id.uid, s.run.id.name, s.dir)
	}
	return nil
}

// initCluster runs initdb into a scratch directory and renames it into
// place, so a crash mid-way never leaves a half-made cluster behind.
func (s *Server) initCluster(ctx context.Context, version string) error {
	tmp := s.dir + ".init"
	s.log.Info("creating embedded PostgreSQL cluster", "dir", s.dir, "version", version, "bindir", s.run.binDir)
	var lastErr error
	for _, locale := range []string{"C.UTF-8", "C"} {
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("embedded PostgreSQL: %w", err)
		}
		if err := os.Mkdir(tmp, 0o700); err != nil {
			return fmt.Errorf("embedded PostgreSQL: %w", err)
		}
		if err := s.run.id.chown(tmp); err != nil {
			return fmt.Errorf("embedded PostgreSQL: %w", err)
		}
		_, _, lastErr = s.run.run(ctx, "initdb", "-D", tmp, "-U", superuser, "--auth=trust",
			"--encoding=UTF8", "--locale="+locale)
		if lastErr == nil {
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("embedded PostgreSQL: initdb failed: %w", lastErr)
	}
	conf, err := os.OpenFile(filepath.Join(tmp, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	_, err = io.WriteString(conf, "\n# Settings for payintake's embedded cluster, rewritten at every start.\ninclude_if_exists = 'payintake.conf'\n")
	if cerr := conf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	if err := os.Rename(tmp, s.dir); err != nil {
		return fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	return nil
}

// socketDir returns the directory for the Unix socket: the cluster dir, or
// a private short directory under os.TempDir() when the path is too long.
func (s *Server) socketDir() (string, error) {
	if len(s.dir)+len("/.s.PGSQL.")+len(strconv.Itoa(port)) <= maxSocketPath {
		return s.dir, nil
	}
	sum := sha256.Sum256([]byte(s.dir))
	dir := filepath.Join(os.TempDir(), "payintake-pg-"+hex.EncodeToString(sum[:6]))
	if len(dir)+len("/.s.PGSQL.")+len(strconv.Itoa(port)) > maxSocketPath {
		return "", fmt.Errorf("embedded PostgreSQL: the socket path under %s would be longer than %d bytes; use a shorter data dir or TMPDIR", dir, maxSocketPath)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("embedded PostgreSQL: socket dir: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("embedded PostgreSQL: socket dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return "", fmt.Errorf("embedded PostgreSQL: socket dir %s is not a directory", dir)
	}
	if int(st.Uid) != s.run.id.uid {
		if int(st.Uid) != os.Geteuid() {
			return "", fmt.Errorf("embedded PostgreSQL: socket dir %s belongs to uid %d, not to us; remove it", dir, st.Uid)
		}
		if err := s.run.id.chown(dir); err != nil {
			return "", fmt.Errorf("embedded PostgreSQL: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("embedded PostgreSQL: socket dir: %w", err)
	}
	s.log.Debug("cluster path too long for a Unix socket; using a short socket dir", "socket_dir", dir)
	return dir, nil
}

// writeConfig writes payintake.conf, included from postgresql.conf.
//
// The two WAL settings are for an upload streamed into the database: its
// one backend writes tens of megabytes of WAL in a single transaction. With
// PostgreSQL's defaults (WAL buffers of 4 MB at these shared_buffers, the
// WAL writer every 200 ms) the backend fills the buffers, writes the WAL
// itself and waits for the WAL writer's fsync of what it gathered (and its
// own at each finished segment), and the commit at the upload's close has
// as much to flush. With the buffers large and the writer every 10 ms, the
// WAL goes to disk behind the backend, off the upload's path. docs/fleet.md
// says the same for a server of one's own.
func (s *Server) writeConfig() error {
	conf := fmt.Sprintf(`# Written by payintake at every start of the embedded cluster; edits are lost.
# Use ALTER SYSTEM (postgresql.auto.conf) for local changes.
listen_addresses = ''
port = %d
unix_socket_directories = %s
unix_socket_permissions = 0700
shared_buffers = 128MB
max_connections = 200
fsync = on
# An upload streamed into the database writes its WAL behind the backend
# instead of in its way (pgserver.go, writeConfig).
wal_buffers = 64MB
wal_writer_delay = 10ms
`, port, confQuote(s.host))
	path := filepath.Join(s.dir, "payintake.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return fmt.Errorf("embedded PostgreSQL: write config: %w", err)
	}
	return s.run.id.chown(path)
}

// confQuote quotes a postgresql.conf string value.
func confQuote(v string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", "''") + "'"
}

// logPath is the server log written by pg_ctl.
func (s *Server) logPath() string { return filepath.Join(s.dir, "server.log") }

// startAttempts bounds the pg_ctl start retries, a second apart. After a
// crash the dead postmaster's children hold its shared memory until they
// notice, which takes longer on a loaded machine.
const startAttempts = 15

// startPostmaster starts the cluster with pg_ctl and waits for it.
func (s *Server) startPostmaster(ctx context.Context) error {
	host, err := s.socketDir()
	if err != nil {
		return err
	}
	s.host = host
	if err := s.writeConfig(); err != nil {
		return err
	}
	rotateLog(s.logPath())
	s.log.Info("starting embedded PostgreSQL", "dir", s.dir)
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		if attempt > 0 {
			// After a crash, children of the dead postmaster may still hold
			// its shared memory for a moment.
			select {
			case <-ctx.Done():
				return fmt.Errorf("embedded PostgreSQL: %w", ctx.Err())
			case <-time.After(time.Second):
			}
		}
		_, _, lastErr = s.run.run(ctx, "pg_ctl", "start", "-D", s.dir, "-l", s.logPath(), "-w", "-t", strconv.Itoa(int(pgCtlTimeout/time.Second)), "-s")
		if lastErr == nil {
			s.started = true
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		s.log.Warn("embedded PostgreSQL did not start", "attempt", attempt+1, "err", lastErr)
	}
	return fmt.Errorf("embedded PostgreSQL did not start: %w%s", lastErr, logTail(s.logPath()))
}

// waitReady pings the server until it accepts connections.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var lastErr error
	for {
		conn, err := pgx.Connect(ctx, s.URLFor("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(context.WithoutCancel(ctx))
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded PostgreSQL at %s is not accepting connections: %w%s", s.host, lastErr, logTail(s.logPath()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ensureDatabase creates database name if it does not exist.
func (s *Server) ensureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.URLFor("postgres"))
	if err != nil {
		return fmt.Errorf("embedded PostgreSQL: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("embedded PostgreSQL: look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == pgerrcode.DuplicateDatabase) {
		return fmt.Errorf("embedded PostgreSQL: create database %s: %w", name, err)
	}
	s.log.Info("created database", "name", name)
	return nil
}

// URL is a pgx connection string for database "payintake" over the
// cluster's Unix socket.
func (s *Server) URL() string { return s.URLFor(DefaultDatabase) }

// URLFor returns the connection string for database db on the same cluster.
func (s *Server) URLFor(db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable",
		dsnQuote(s.host), s.port, superuser, dsnQuote(db))
}

// dsnQuote quotes a keyword/value connection string value when needed.
func dsnQuote(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\\'=") {
		return v
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", `\'`) + "'"
}

// Stop releases this handle. It stops the cluster (fast shutdown) if no
// other Server, in this or another process, still uses it and the cluster
// was started by payintake (this Server, or one that has finished since,
// recorded in DATA_DIR/postgres.owner); otherwise it leaves the cluster
// running. Stop is idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == nil {
		return nil
	}
	lock, err := flockFile(ctx, lockPath(s.dataDir), syscall.LOCK_EX)
	if err != nil {
		return fmt.Errorf("stop embedded PostgreSQL: %w", err)
	}
	defer lock.Close()
	// Drop our shared lock, then see whether anyone else still holds one.
	// Nobody can take a new one meanwhile: Start takes it under the start
	// lock. Both under syscall.ForkLock (read): a child this process is
	// forking holds a copy of every descriptor, the lock's too, until it
	// has exec'd (when close-on-exec drops them), so our lock would outlive
	// the Close and we would take ourselves for another user; Go forks
	// holding ForkLock for writing until the child has exec'd.
	syscall.ForkLock.RLock()
	s.users.Close()
	s.users = nil
	alone, err := tryFlockFile(usersPath(s.dataDir))
	syscall.ForkLock.RUnlock()
	if err != nil {
		return fmt.Errorf("stop embedded PostgreSQL: %w", err)
	}
	if alone == nil {
		s.log.Debug("embedded PostgreSQL still in use by another process; leaving it running")
		return nil
	}
	defer alone.Close()
	running, err := s.isRunning(ctx)
	if err != nil || !running {
		return err
	}
	if !s.started {
		pid, err := readPostmasterPID(s.dir)
		raw, rerr := os.ReadFile(ownerPath(s.dataDir))
		if err != nil || rerr != nil || strings.TrimSpace(string(raw)) != strconv.Itoa(pid.pid) {
			s.log.Debug("embedded PostgreSQL was not started by payintake; leaving it running")
			return nil
		}
	}
	s.log.Info("stopping embedded PostgreSQL", "dir", s.dir)
	if _, _, err := s.run.run(ctx, "pg_ctl", "stop", "-D", s.dir, "-m", "fast", "-w", "-t", strconv.Itoa(int(pgCtlTimeout/time.Second)), "-s"); err != nil {
		return fmt.Errorf("stop embedded PostgreSQL: %w%s", err, logTail(s.logPath()))
	}
	if err := os.Remove(ownerPath(s.dataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stop embedded PostgreSQL: %w", err)
	}
	return nil
}

// postmasterPID is the content of postmaster.pid that matters to us.
type postmasterPID struct {
	pid       int
	port      int
	socketDir string
}

// readPostmasterPID parses dir/postmaster.pid.
func readPostmasterPID(dir string) (postmasterPID, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return postmasterPID{}, fmt.Errorf("read postmaster.pid: %w", err)
	}
	lines := strings.Split(string(raw), "\n")
	var p postmasterPID
	if p.pid, err = strconv.Atoi(strings.TrimSpace(lines[0])); err != nil || p.pid <= 0 {
		return postmasterPID{}, fmt.Errorf("bad postmaster.pid in %s", dir)
	}
	if len(lines) > 3 {
		p.port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	if len(lines) > 4 {
		p.socketDir = strings.TrimSpace(lines[4])
	}
	return p, nil
}

// isRunning reports whether the postmaster named in postmaster.pid is alive.
// A zombie or a recycled pid counts as not running (a crashed cluster);
// pg_ctl start then takes over the stale pid file. A postmaster that is
// dying (killed, its sockets already closed, but not yet a zombie) is waited
// for, until ctx is done: it is about to be a crashed cluster, and taken for
// a live one it would leave Start waiting for connections nobody accepts.
func (s *Server) isRunning(ctx context.Context) (bool, error) {
	p, err := readPostmasterPID(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	for {
		if err := syscall.Kill(p.pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
			return false, nil
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				if _, perr := os.Stat("/proc/self/stat"); perr == nil {
					return false, nil // process gone
				}
			}
			return true, nil // no /proc: trust kill(0)
		}
		comm, state, exiting, ok := parseStat(stat)
		if !ok {
			return true, nil
		}
		if exiting && state != 'Z' && state != 'X' {
			select {
			case <-ctx.Done():
				return false, fmt.Errorf("embedded PostgreSQL: the postmaster (pid %d) is exiting; waited for it: %w", p.pid, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if state == 'Z' || state == 'X' || (comm != "postgres" && comm != "postmaster") {
			return false, s.staleProcess(p, comm, state)
		}
		return true, nil
	}
}

// pfExiting is the kernel's PF_EXITING flag (linux/sched.h): the process
// is in exit, from the moment a fatal signal is acted on.
const pfExiting = 0x4

// parseStat reads the command name, state and whether it is exiting from a
// /proc/PID/stat: "pid (comm) state ppid pgrp session tty_nr tpgid flags ...".
func parseStat(stat []byte) (comm string, state byte, exiting, ok bool) {
	open, closing := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
	if open < 0 || closing < open || closing+2 >= len(stat) {
		return "", 0, false, false
	}
	fields := strings.Fields(string(stat[closing+2:]))
	if len(fields) < 7 {
		return "", 0, false, false
	}
	flags, err := strconv.ParseUint(fields[6], 10, 64)
	return string(stat[open+1 : closing]), stat[closing+2], err == nil && flags&pfExiting != 0, true
}

// staleProcess handles a postmaster.pid whose process is not a live
// postmaster: a zombie's pid file is moved out of the way (postgres would
// take the zombie for a live postmaster), with its socket's lock file.
func (s *Server) staleProcess(p postmasterPID, comm string, state byte) error {
	s.log.Warn("stale postmaster.pid (server crashed?)", "pid", p.pid, "comm", comm, "state", string(state))
	if state != 'Z' && state != 'X' {
		return nil
	}
	if err := os.Remove(filepath.Join(s.dir, "postmaster.pid")); err != nil {
		return fmt.Errorf("embedded PostgreSQL: remove stale postmaster.pid: %w", err)
	}
	if p.socketDir != "" && p.port != 0 {
		sockLock := filepath.Join(p.socketDir, fmt.Sprintf(".s.PGSQL.%d.lock", p.port))
		if raw, err := os.ReadFile(sockLock); err == nil {
			if first, _, _ := strings.Cut(string(raw), "\n"); strings.TrimSpace(first) == strconv.Itoa(p.pid) {
				if err := os.Remove(sockLock); err != nil {
					return fmt.Errorf("embedded PostgreSQL: remove stale socket lock file: %w", err)
				}
			}
		}
	}
	return nil
}

// ensureTraversable makes sure the cluster account can reach dataDir/postgres:
// every directory from / down to dataDir needs the search bit for it. The
// data dir itself gets o+x if we own it; other directories are not touched.
func ensureTraversable(dataDir string, id identity, log *slog.Logger) error {
	if id.cred == nil {
		return nil
	}
	var chain []string
	for p := dataDir; ; p = filepath.Dir(p) {
		chain = append(chain, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		p := chain[i]
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("embedded PostgreSQL: %w", err)
		}
		if id.canTraverse(fi) {
			continue
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if p == dataDir && st != nil && int(st.Uid) == os.Geteuid() {
			mode := fi.Mode().Perm() | 0o001
			if err := os.Chmod(p, mode); err != nil {
				return fmt.Errorf("embedded PostgreSQL: make data dir traversable for user %s: %w", id.name, err)
			}
			log.Info("made the data dir traversable (o+x) for the postgres user", "dir", p, "mode", fmt.Sprintf("%#o", mode))
			continue
		}
		return &untraversableError{user: id.name, dir: p, mode: fi.Mode().Perm()}
	}
	return nil
}

// untraversableError says that the cluster's account cannot reach a
// directory on the way to the data dir.
type untraversableError struct {
	user string
	dir  string
	mode os.FileMode
}

func (e *untraversableError) Error() string {
	return fmt.Sprintf("embedded PostgreSQL runs as user %s (payintake runs as root), which cannot enter %s (mode %#o); allow it with `chmod o+x %s` or choose a data dir under a path it can traverse", e.user, e.dir, e.mode, e.dir)
}

// locationPath names the file that records where the cluster of a data dir
// lives when it is not in the data dir itself.
func locationPath(dataDir string) string { return filepath.Join(dataDir, "postgres.location") }

// placeCluster returns the cluster directory for dataDir: dataDir/postgres
// when the cluster's account can reach it. When payintake runs as root from
// a data dir that account cannot enter (the usual first run: root in /root,
// mode 0700), it does not ask the operator to open up their home: the
// cluster lives under fallback instead, in a directory named by a hash of
// the data dir's absolute path (so the same data dir always finds the same
// cluster), recorded in dataDir/postgres.location for operators. Nothing
// is made world-readable: the cluster dir stays 0700, owned by postgres.
func placeCluster(dataDir, fallback string, id identity, log *slog.Logger) (string, error) {
	err := ensureTraversable(dataDir, id, log)
	var ue *untraversableError
	if !errors.As(err, &ue) {
		return filepath.Join(dataDir, "postgres"), err
	}
	if fi, serr := os.Stat(filepath.Join(dataDir, "postgres")); serr == nil && fi.IsDir() {
		// A cluster already made in the data dir stays where it is: moving
		// it is the operator's decision.
		return "", err
	}
	if fallback == "" {
		fallback = DefaultFallbackDir
	}
	sum := sha256.Sum256([]byte(dataDir))
	home := filepath.Join(fallback, hex.EncodeToString(sum[:8]))
	if mkErr := os.MkdirAll(home, 0o755); mkErr != nil {
		return "", fmt.Errorf("%w; the fallback %s could not be made either: %w", err, home, mkErr)
	}
	if tErr := ensureTraversable(home, id, log); tErr != nil {
		return "", fmt.Errorf("%w; the fallback %s is not reachable either: %w", err, home, tErr)
	}
	dir := filepath.Join(home, "postgres")
	note := fmt.Sprintf("%s\n# The embedded cluster of the data dir %s lives here because user %s cannot enter %s.\n", dir, dataDir, ue.user, ue.dir)
	if wErr := os.WriteFile(locationPath(dataDir), []byte(note), 0o600); wErr != nil {
		return "", fmt.Errorf("record the cluster's location: %w", wErr)
	}
	log.Info("the embedded cluster lives outside the data dir, which its account cannot enter", "cluster", dir, "data_dir", dataDir, "user", ue.user, "untraversable", ue.dir)
	return dir, nil
}

// rotateLog moves a server log over 16 MiB aside, keeping one old copy.
func rotateLog(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 16<<20 {
		_ = os.Rename(path, path+".old")
	}
}

// logTail returns the end of the server log, formatted for an error.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 2048
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		if _, err := f.Seek(-max, io.SeekEnd); err != nil {
			return ""
		}
	}
	raw, err := io.ReadAll(f)
	if err != nil || len(raw) == 0 {
		return ""
	}
	text := strings.TrimSpace(string(raw))
	lines := strings.Split(text, "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "; server log " + path + " ends with:\n" + strings.Join(lines, "\n")
}
