package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	outbound "github.com/payintake/payintake/dispatch"
	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/httpapi"
	"github.com/payintake/payintake/intake/sftpd"
	"github.com/payintake/payintake/internal/clientaddr"
	"github.com/payintake/payintake/internal/connlimit"
	"github.com/payintake/payintake/internal/httpbody"
	"github.com/payintake/payintake/internal/observe"
	"github.com/payintake/payintake/notify"
	"github.com/payintake/payintake/partnerauth"
	"github.com/payintake/payintake/records"
	"github.com/payintake/payintake/review"
	samplefiles "github.com/payintake/payintake/sample-files"
)

// dispatchWorkers is how many periods one serve process dispatches at once.
const dispatchWorkers = 2

// hostKeyRefresh is how often serve reads the SSH host keys again: a
// rotation reaches every server within it.
const hostKeyRefresh = 30 * time.Second

// cmdServe runs the SFTP drop zone, the HTTP address (API, reviewers,
// /metrics, /healthz, /readyz) and the workers that process envelopes.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("serve", stderr)
	httpAddr := fs.String("http-addr", "127.0.0.1:8080", "address of the HTTP API, /metrics and /healthz")
	sftpAddr := fs.String("sftp-addr", "127.0.0.1:2022", "address of the SFTP drop zone")
	demo := fs.Bool("demo", false, "set up a demo (SFTP partner, held exceptions, reviewer, API token, webhook secret, vendor target) and print how to try each")
	workers := fs.Int("workers", 4, "files processed at once by this process (0: only receive; another serve processes)")
	maxConns := fs.Int("db-max-conns", 20, "database connections at most (at least 2 per worker plus 2)")
	maxSize := fs.String("max-file-size", "1GiB", "largest file accepted over SFTP (bytes, or with KiB, MiB, GiB)")
	idleTimeout := fs.Duration("sftp-idle-timeout", sftpd.DefaultIdleTimeout, "an SFTP connection with no SFTP request or data for this long is closed, SSH keepalives notwithstanding (uploads left open can be resumed)")
	maxSessions := fs.Int("sftp-max-sessions", sftpd.DefaultMaxSessions, "SFTP connections one partner may have logged in to this process at once")
	resumeWindow := fs.Duration("sftp-resume-window", sftpd.DefaultResumeWindow, "an SFTP upload cut off (or temp-named, never renamed) can be resumed this long after its last write")
	checkpoint := fs.Duration("sftp-checkpoint", sftpd.DefaultCheckpoint, "an SFTP upload in progress stores what it has received this often, so that if this process dies the partner's resume on another loses at most about this much of the transfer (each checkpoint writes its bytes to the database once more)")
	jobTimeout := fs.Duration("job-timeout", intake.DefaultJobTimeout, "longest processing of one file; then it is cancelled and retried")
	orphanAfter := fs.Duration("orphan-after", intake.DefaultOrphanAfter, "a received file left unprocessed by a stopped process is queued again after this long")
	readTimeout := fs.Duration("http-read-timeout", 5*time.Minute, "longest time to read one HTTP request, body included (a 64 MiB submission needs about 220 KB/s)")
	writeTimeout := fs.Duration("http-write-timeout", 5*time.Minute, "longest time to write one HTTP response")
	bodyTimeout := fs.Duration("http-body-timeout", httpbody.DefaultTimeout, "a submission, leg replay or review body must arrive within this long plus its size at --http-body-min-rate, or its connection is closed (408)")
	bodyMinRate := fs.String("http-body-min-rate", "32KiB", "slowest rate, per second, at which a request body may arrive once --http-body-timeout has passed (bytes, or with KiB, MiB)")
	httpMaxConns := fs.Int("http-max-conns", defaultHTTPMaxConns, "HTTP connections open at once, in all; more are closed as soon as accepted (lowered to fit the descriptor limit)")
	httpPerAddr := fs.Int("http-max-conns-per-addr", defaultHTTPPerAddr, "HTTP connections open at once from one client address")
	sftpMaxConns := fs.Int("sftp-max-conns", defaultSFTPMaxConns, "SFTP connections open at once, in all (logged in or not); more are closed as soon as accepted (lowered to fit the descriptor limit)")
	sftpPerAddr := fs.Int("sftp-max-conns-per-addr", defaultSFTPPerAddr, "SFTP connections open at once from one client address")
	httpIdleTimeout := fs.Duration("http-idle-timeout", 2*time.Minute, "an idle keep-alive HTTP connection is closed after this long")
	metricsAddr := fs.String("metrics-addr", os.Getenv("PAYINTAKE_METRICS_ADDR"), "serve /metrics on this address only, not on --http-addr (PAYINTAKE_METRICS_ADDR; empty: on --http-addr)")
	metricsTokenFile := fs.String("metrics-token-file", os.Getenv("PAYINTAKE_METRICS_TOKEN_FILE"), "/metrics requires \"Authorization: Bearer TOKEN\" with the token in this file (PAYINTAKE_METRICS_TOKEN_FILE; empty: no token)")
	legacyAlgorithms := fs.Bool("ssh-legacy-algorithms", false, "also offer SSH algorithms with known weaknesses that old clients need: diffie-hellman-group14-sha1, hmac-sha1, hmac-sha1-96 and SHA-1 ssh-rsa host key signatures (docs/fleet.md)")
	hostKeyTypes := fs.String("ssh-host-key-types", "ed25519,ecdsa,rsa", "the SSH host key types served (all are announced to clients): drop ecdsa and rsa for a while when partners pinned only the Ed25519 key with a client that would pick another type (docs/fleet.md)")
	drainTimeout := fs.Duration("drain-timeout", 60*time.Second, "on SIGTERM, how long uploads and requests in flight may take to finish (new connections are refused and /readyz answers 503 meanwhile); set the orchestrator's stop timeout above it")
	pprofAddr := fs.String("pprof-addr", "", "serve Go's profiler (net/http/pprof, /debug/pprof/) on this loopback address, for finding where time goes (off when empty)")
	trustedProxies := fs.String("trusted-proxies", os.Getenv("PAYINTAKE_TRUSTED_PROXIES"), "load balancers (IPs or CIDR ranges, comma-separated) whose word on the client's address is taken: a PROXY protocol header on --sftp-addr (required from them, refused from others), --trusted-proxy-header on --http-addr (PAYINTAKE_TRUSTED_PROXIES; empty: none)")
	proxyHeader := fs.String("trusted-proxy-header", string(clientaddr.XForwardedFor), "the header the trusted proxies append the client's address to on --http-addr: x-forwarded-for (with X-Forwarded-Proto) or forwarded (RFC 7239)")
	tlsCert := fs.String("tls-cert", "", "PEM certificate (chain) to serve --http-addr over HTTPS, with --tls-key; both are read again on SIGHUP")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("serve takes no arguments besides flags")
	}
	if *workers < 0 || *workers > 256 {
		return usagef("--workers %d: give a number from 0 to 256", *workers)
	}
	// A worker holds one connection for its transaction and reads the
	// file's bytes on another. (A dispatch run also holds one, owning its
	// period, and uses one more at a time: with the spare two, it can
	// always go on.)
	if need := 2**workers + 2; *maxConns < need {
		return usagef("--db-max-conns %d is too small for --workers %d: give at least %d", *maxConns, *workers, need)
	}
	if *jobTimeout < time.Second || *orphanAfter < 100*time.Millisecond {
		return usagef("--job-timeout must be at least 1s and --orphan-after at least 100ms")
	}
	if *idleTimeout < time.Second || *maxSessions < 1 || *resumeWindow < time.Minute {
		return usagef("--sftp-idle-timeout must be at least 1s, --sftp-max-sessions at least 1 and --sftp-resume-window at least 1m")
	}
	servedTypes, err := parseHostKeyTypes("--ssh-host-key-types", *hostKeyTypes)
	if err != nil {
		return err
	}
	proxies, err := clientaddr.Parse(*trustedProxies, clientaddr.Header(strings.ToLower(*proxyHeader)))
	if err != nil {
		return usagef("--trusted-proxies / --trusted-proxy-header: %v", err)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together: give both, or neither for plain HTTP")
	}
	var certs *certFiles
	if *tlsCert != "" {
		certs = &certFiles{cert: *tlsCert, key: *tlsKey}
		if _, err := certs.load(); err != nil {
			return err
		}
	}
	minRate, err := parseSize(*bodyMinRate)
	if err != nil || minRate <= 0 {
		return usagef("--http-body-min-rate %q: give a positive byte count such as 32KiB", *bodyMinRate)
	}
	if *httpMaxConns < 1 || *httpPerAddr < 1 || *sftpMaxConns < 1 || *sftpPerAddr < 1 {
		return usagef("--http-max-conns, --sftp-max-conns and their -per-addr must be at least 1")
	}
	bodyLimits := httpbody.Limits{Timeout: *bodyTimeout, MinRate: minRate, Ceiling: *readTimeout}
	maxFileSize, err := parseSize(*maxSize)
	if err != nil {
		return usagef("--max-file-size %q: %v", *maxSize, err)
	}
	metricsToken, err := readMetricsToken(*metricsTokenFile)
	if err != nil {
		return err
	}
	log := g.alwaysLogger(stderr)
	dataDir, err := filepath.Abs(g.dataDir)
	if err != nil {
		return fmt.Errorf("data dir %q: %w", g.dataDir, err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir %s: %w", dataDir, err)
	}
	// River's LISTEN connection is taken out of the pool for good (pgx
	// Hijack), so the pool gets one less for the total to stay within
	// --db-max-conns (TestLoadManyPartners measures it).
	poolConns := *maxConns
	if *workers > 0 {
		poolConns--
	}
	if *demo {
		g.needs = append(g.needs, "demo") // the sftp, curl and openssl its printed lines run
	}
	e, err := g.open(ctx, log, int32(poolConns))
	if err != nil {
		return err
	}
	defer e.close()
	// During a rolling deploy several releases serve at once: each says
	// which it is (once what it needs is there: a missing package is one
	// sentence on stderr, nothing else).
	build := observe.BuildInfo()
	log.Info("starting", "version", build.Version, "revision", build.Revision, "go", build.GoVersion)
	if err := intake.MigrateQueue(ctx, e.store.Pool()); err != nil {
		return err
	}
	// A serve started with another secret key than the one the webhook
	// secrets were sealed under says so now, not at the first delivery.
	if err := e.store.CheckWebhookSecrets(ctx); err != nil {
		return err
	}

	// The host keys are the database's, the same on every server; the
	// first start creates them.
	hostKeys, err := sftpd.EnsureHostKeys(ctx, e.store, log)
	if err != nil {
		return err
	}
	for _, k := range hostKeys.Active {
		log.Info("ssh host key", "fingerprint", ssh.FingerprintSHA256(k.PublicKey()), "type", k.PublicKey().Type(),
			"served", slices.Contains(servedTypes, k.PublicKey().Type()))
	}
	spool := filepath.Join(dataDir, "spool")
	sftpd.CleanSpool(spool, 24*time.Hour)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := intake.NewMetrics(reg)
	registerBuildInfo(reg)
	// An OpenPGP upload's plaintext is bounded as a plain upload is.
	e.intake.MaxPlaintext = maxFileSize
	registerDBMetrics(reg, e.store.Pool())

	// Outbound dispatch runs on the same River client, on a queue of its own.
	disp := outbound.New(e.store.Pool(), outbound.Config{Log: log.With("component", "dispatch"), Metrics: outbound.NewMetrics(reg)})
	notifier := notify.New(e.store, notify.Config{Log: log.With("component", "notify"), Metrics: notify.NewMetrics(reg)})
	queue, err := intake.NewQueue(e.intake, metrics, intake.QueueConfig{Workers: *workers,
		JobTimeout: *jobTimeout, Register: func(w *river.Workers) { outbound.Register(w, disp) },
		PeriodicJobs: outbound.PeriodicJobs(), Queues: map[string]river.QueueConfig{outbound.QueueName: {MaxWorkers: dispatchWorkers}}})
	if err != nil {
		return err
	}
	creds := partnerauth.New(e.store, partnerauth.WithMetrics(reg))
	sftpSrv, err := sftpd.New(sftpd.Config{
		Store: e.store, HostKeys: hostKeys, HostKeyRefresh: hostKeyRefresh, LegacyAlgorithms: *legacyAlgorithms, HostKeyTypes: servedTypes, SpoolDir: spool, MaxFileSize: maxFileSize,
		Intake: e.intake, Auth: creds, Enqueue: queue.Enqueue, Metrics: sftpd.NewMetrics(reg), Log: log.With("component", "sftp"),
		IdleTimeout: *idleTimeout, MaxSessions: *maxSessions, ResumeWindow: *resumeWindow,
		Checkpoint: *checkpoint,
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	// Ready while not draining and the database can commit (a read alone
	// says nothing of a primary whose synchronous standby is gone).
	var draining atomic.Bool
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyCommitTimeout)
		defer cancel()
		if err := e.store.CanCommit(ctx); err != nil {
			log.Warn("not ready", "err", err)
			http.Error(w, "database cannot commit", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	// /metrics goes on --http-addr, or only on its own --metrics-addr; with a
	// token, only to a scraper that sends it.
	var metricsMux *http.ServeMux
	if *metricsAddr != "" {
		metricsMux = http.NewServeMux()
		metricsMux.Handle("GET /metrics", protectMetrics(metricsHandler(reg), metricsToken))
	} else {
		mux.Handle("GET /metrics", protectMetrics(metricsHandler(reg), metricsToken))
	}
	// Other HTTP handlers are mounted here, one line each, on mux. Metrics of
	// their own go on reg (never the global default registry).
	httpapi.Mount(ctx, mux, e.intake, creds, dataDir, httpapi.WithEnqueue(queue.Enqueue), httpapi.WithBodyLimits(bodyLimits)) // HTTP submissions, webhooks, /v1/openapi.json; reaps old Idempotency-Keys
	review.Mount(mux, e.store, log).Body = bodyLimits
	if *demo {
		mountDemoVendor(mux)
	}

	sftpLn, err := net.Listen("tcp", *sftpAddr)
	if err != nil {
		return fmt.Errorf("listen on --sftp-addr %s: %w", *sftpAddr, err)
	}
	// Always wrapped: without trusted proxies, it refuses a PROXY header.
	sftpLn = proxies.Listener(sftpLn)
	httpLn, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		sftpLn.Close()
		return fmt.Errorf("listen on --http-addr %s: %w", *httpAddr, err)
	}
	httpCap, sftpCap := connCaps(connlimit.Limits{Max: *httpMaxConns, PerAddr: *httpPerAddr},
		connlimit.Limits{Max: *sftpMaxConns, PerAddr: *sftpPerAddr}, *maxConns, log)
	// The SFTP caps wrap the PROXY listener, so a connection through a
	// trusted proxy counts under its client's address, not the proxy's:
	// its header is read as it is accepted (HAProxy sends it at once; a
	// trusted proxy that does not is cut after clientaddr.HeaderTimeout).
	httpLn, sftpLn = capConns(httpLn, httpCap, "http", reg), capConns(sftpLn, sftpCap, "sftp", reg)
	var metricsLn net.Listener
	if metricsMux != nil {
		if metricsLn, err = net.Listen("tcp", *metricsAddr); err != nil {
			sftpLn.Close()
			httpLn.Close()
			return fmt.Errorf("listen on --metrics-addr %s: %w", *metricsAddr, err)
		}
		defer metricsLn.Close()
	}
	// The queue stops at the end of the drain (Stop), not when ctx ends:
	// cancelling Start's context would cancel the jobs running.
	if err := queue.Start(context.WithoutCancel(ctx)); err != nil {
		sftpLn.Close()
		httpLn.Close()
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		return err
	}
	if *demo {
		scheme := "http"
		if certs != nil {
			scheme = "https"
		}
		if err := setupDemo(ctx, e, dataDir, sftpLn.Addr(), httpLn.Addr(), scheme, hostKeys, stdout); err != nil {
			sftpLn.Close()
			httpLn.Close()
			_ = queue.Stop(context.Background())
			if ctx.Err() != nil {
				return nil // interrupted while starting
			}
			return err
		}
	}

	// runCtx ends the servers: after the drain that SIGTERM (ctx) starts,
	// or at once when one of them fails.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var wg sync.WaitGroup
	if *pprofAddr != "" {
		if err := servePprof(runCtx, &wg, *pprofAddr, log); err != nil {
			sftpLn.Close()
			httpLn.Close()
			_ = queue.Stop(context.Background())
			return err
		}
	}
	errs := make(chan error, 3)
	// Work in flight (notifications being sent) runs until cutWork, at the
	// drain's end; new work is claimed only until the drain begins (claims).
	workCtx, cutWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cutWork()
	claims, stopClaims := context.WithCancel(runCtx)
	defer stopClaims()
	if *workers > 0 {
		// Work left by a process that died is found within --orphan-after
		// (River alone would wait for its rescue, --job-timeout + 5m). The
		// sweep ends with the servers, before the workers stop.
		wg.Go(func() { queue.SweepOrphans(runCtx, e.store.Pool(), *orphanAfter) })
		wg.Go(func() { outbound.Sweep(runCtx, disp, queue.Insert) })
		// Result notifications: POSTs to partners, outside any transaction.
		wg.Go(func() { notifier.RunUntil(claims, workCtx) })
	}
	// Every read has a deadline: headers within 10 s, a whole request within
	// --http-read-timeout, a body within --http-body-timeout at
	// --http-body-min-rate (webhook bodies and login forms within 10 s),
	// all set by the handlers that read them (internal/httpbody); a request
	// refused before its body is read is answered at once and its
	// connection closed; idle connections are closed.
	// The client's address and scheme are settled first (clientaddr), so
	// that the request's log line, limits and cookies all see the client.
	httpSrv := &http.Server{Handler: proxies.Middleware(observeHTTP(httpbody.Guard(mux), reg, log, e.tracing)), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: *readTimeout, WriteTimeout: *writeTimeout, IdleTimeout: *httpIdleTimeout,
		// The server's own complaints (a failed TLS handshake, say) are log
		// lines like the others, not bare text on stderr.
		ErrorLog: slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelWarn)}
	if certs != nil {
		httpSrv.TLSConfig = certs.config()
	}
	// Caught from now on, with or without TLS, so that a reload
	// (systemctl reload) never kills serve.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	wg.Go(func() { reloadOnHangup(runCtx, hup, certs, log) })
	wg.Go(func() {
		log.Info("http listening", "addr", httpLn.Addr().String(), "tls", certs != nil, "trusted_proxies", proxies.String())
		var err error
		if certs != nil {
			err = httpSrv.ServeTLS(httpLn, "", "")
		} else {
			err = httpSrv.Serve(httpLn)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("http server: %w", err)
			stop()
		}
	})
	wg.Go(func() {
		<-runCtx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(shut)
	})
	if metricsLn != nil {
		metricsSrv := &http.Server{Handler: httpbody.Guard(metricsMux), ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: *httpIdleTimeout}
		wg.Go(func() {
			log.Info("metrics listening", "addr", metricsLn.Addr().String(), "token", metricsToken != "")
			if err := metricsSrv.Serve(metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("metrics server: %w", err)
				stop()
			}
		})
		wg.Go(func() {
			<-runCtx.Done()
			shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = metricsSrv.Shutdown(shut)
		})
	}
	wg.Go(func() {
		log.Info("sftp listening", "addr", sftpLn.Addr().String(), "workers", *workers, "max_file_size", maxFileSize)
		if err := sftpSrv.Serve(runCtx, sftpLn); err != nil {
			errs <- err
			stop()
		}
	})
	sdNotify(log, daemon.SdNotifyReady)
	// The drain: not ready at once, and no new queue work taken (jobs and
	// notifications waiting are left to the other replicas); no new SFTP
	// connections, the uploads in flight finish; then no new HTTP
	// connections, the requests in flight finish; all within
	// --drain-timeout. Running jobs and notifications have workGrace more.
	// What is left is cut: uploads are stored to be resumed on another
	// replica, jobs and notifications put back for another to take at once.
	var drainEnd time.Time
	select {
	case <-ctx.Done():
		draining.Store(true)
		sdNotify(log, daemon.SdNotifyStopping)
		drainEnd = time.Now().Add(*drainTimeout)
		log.Info("draining", "drain_timeout", *drainTimeout, "running_work_cut_after", *drainTimeout+workGrace)
		queue.StopFetching()
		stopClaims()
		dctx, cancel := context.WithDeadline(context.Background(), drainEnd)
		sftpSrv.Drain(dctx)
		if err := httpSrv.Shutdown(dctx); err != nil {
			log.Warn("http requests still running at the drain's end: cut", "err", err)
		}
		cancel()
		stop()
	case <-runCtx.Done():
		drainEnd = time.Now().Add(30 * time.Second)
	}
	// Notifications in flight are cut at the work's end, jobs below.
	workEnd := drainEnd.Add(workGrace)
	cutAtEnd := time.AfterFunc(time.Until(workEnd), cutWork)
	defer cutAtEnd.Stop()
	wg.Wait()
	// Uploads are closed (or stored to be resumed) by now; let running
	// jobs finish, or cancel them at the work's end (they go back to the
	// queue at once).
	shut, cancel := context.WithDeadline(context.Background(), workEnd)
	defer cancel()
	if err := queue.Stop(shut); err != nil {
		log.Error("stop workers", "err", err)
	}
	log.Info("stopped")
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// reloadOnHangup reads --tls-cert and --tls-key again on each SIGHUP (from
// hup) until ctx ends; a pair that cannot be loaded is logged and the old
// one served on. Without TLS (certs nil) there is nothing to read again.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, certs *certFiles, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if certs == nil {
				log.Info("SIGHUP: nothing to reload (no --tls-cert)")
			} else if leaf, err := certs.load(); err != nil {
				log.Error("tls certificate not reloaded: the one loaded before is served on", "err", err)
			} else {
				log.Info("tls certificate reloaded", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
			}
		}
	}
}

// workGrace is how long past --drain-timeout the jobs and notifications
// running at SIGTERM may still take to finish (the platform's stop timeout
// covers it: docs/fleet.md).
const workGrace = 5 * time.Second

// readyCommitTimeout bounds /readyz's commit: a database that cannot commit
// within it is not ready.
const readyCommitTimeout = 2 * time.Second

// sdNotify tells systemd (Type=notify, $NOTIFY_SOCKET) the service's state;
// without systemd it does nothing.
func sdNotify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("notify systemd", "state", state, "err", err)
	}
}

// parseSize reads a byte count: 1073741824, 1GiB, 500MiB, 64KiB (K, M, G
// alone also mean powers of 1024).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, errors.New("give a positive size such as 1GiB, 500MiB or 1048576")
	}
	return n * mult, nil
}

// demo is what the demo steps share: where things are, and what to print.
type demo struct {
	e        *env
	dir      string // DATA_DIR/demo
	sftpAddr net.Addr
	httpAddr net.Addr
	httpURL  string // http://127.0.0.1:PORT (https:// with --tls-cert)
	hostKeys *sftpd.HostKeys
	out      io.Writer
	cli      string // how a printed line runs payintake on this server's database (demoCLI)
}

// demoStep is one part of `serve --demo`: it sets something up (again, on
// a restart, without harm) and prints how to use it. To show another part of
// the product, add a step to demoSteps.
type demoStep struct {
	name string
	run  func(ctx context.Context, d *demo) error
}

func demoSteps() []demoStep {
	return []demoStep{
		{"sftp partner", demoSFTP},
		{"held exceptions", demoHeld},
		{"reviewer", demoReviewer},
		{"http api", demoAPI},
		{"webhook", demoWebhook},
		{"vendor target", func(ctx context.Context, d *demo) error {
			return setupDemoDispatch(ctx, d.e.store, d.httpAddr, d.cli, d.out)
		}},
	}
}

// setupDemo runs the demo steps in order and prints what each one offers.
func setupDemo(ctx context.Context, e *env, dataDir string, sftpAddr, httpAddr net.Addr, scheme string, hostKeys *sftpd.HostKeys, stdout io.Writer) error {
	d := &demo{e: e, dir: filepath.Join(dataDir, "demo"), sftpAddr: sftpAddr, httpAddr: httpAddr, httpURL: scheme + "://" + loopback(httpAddr.String()),
		hostKeys: hostKeys, out: stdout, cli: demoCLI(e.g, dataDir)}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", d.dir, err)
	}
	for _, st := range demoSteps() {
		if err := st.run(ctx, d); err != nil {
			return fmt.Errorf("demo (%s): %w", st.name, err)
		}
	}
	return nil
}

// demoCLI is how the demo's printed command lines run payintake so that they
// work as printed: the way this process was started ("go run
// ./cmd/payintake" when it runs from Go's build cache, which is how `go run`
// starts it, so the line runs from the source tree; else this executable's
// path), with the flag that reaches the same database (--database-url when
// given as a flag, else --data-dir unless it is the default for the current
// folder).
func demoCLI(g *globals, dataDir string) string {
	prog := "payintake"
	if exe, err := os.Executable(); err == nil {
		if strings.Contains(exe, string(filepath.Separator)+"go-build") {
			prog = "go run ./cmd/payintake"
		} else {
			prog = shellQuote(exe)
		}
	}
	switch def, _ := filepath.Abs("payintake-data"); {
	case g.databaseURL != "" && g.databaseURL != os.Getenv("PAYINTAKE_DATABASE_URL"):
		return prog + " --database-url " + shellQuote(g.databaseURL)
	case g.databaseURL == "" && dataDir != def:
		return prog + " --data-dir " + shellQuote(dataDir)
	}
	return prog
}

// loopback replaces an unspecified listen host (0.0.0.0, ::) by 127.0.0.1.
func loopback(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// demoSFTP makes sure partner "demo" exists with a key pair kept in the data
// dir, writes a known_hosts file for this server, and prints how to use it.
func demoSFTP(ctx context.Context, d *demo) error {
	st := d.e.store
	keyPath := filepath.Join(d.dir, "id_ed25519")
	if _, err := sftpd.EnsureKeyPair(keyPath, "payintake demo partner"); err != nil {
		return fmt.Errorf("demo key: %w", err)
	}
	pub, err := os.ReadFile(keyPath + ".pub")
	if err != nil {
		return fmt.Errorf("demo key: %w", err)
	}
	keys, err := intake.ParseAuthorizedKeys("demo", pub)
	if err != nil {
		return fmt.Errorf("demo key %s.pub: %w", keyPath, err)
	}
	if err := st.AddPartner(ctx, records.Partner{ID: "demo", Name: "Demo partner"}); err != nil && !errors.Is(err, records.ErrExists) {
		return err
	}
	for _, k := range keys {
		if err := st.AddPartnerKey(ctx, k); err != nil {
			return err
		}
	}
	host, port, err := net.SplitHostPort(loopback(d.sftpAddr.String()))
	if err != nil {
		return fmt.Errorf("sftp address %s: %w", d.sftpAddr, err)
	}
	knownHosts := filepath.Join(d.dir, "known_hosts")
	var lines strings.Builder
	for _, k := range d.hostKeys.Active {
		lines.WriteString(knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(host, port))}, k.PublicKey()) + "\n")
	}
	if err := os.WriteFile(knownHosts, []byte(lines.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", knownHosts, err)
	}
	opts := fmt.Sprintf("-i %s -P %s -o UserKnownHostsFile=%s -o IdentitiesOnly=yes", shellQuote(keyPath), port, shellQuote(knownHosts))
	target := "demo@" + host
	if strings.Contains(host, ":") {
		target = "demo@[" + host + "]"
	}
	sample := "sample-files/clean-first-run.csv"
	fmt.Fprintf(d.out, `
Demo partner "demo" is ready; its key pair is in %s (id_ed25519, id_ed25519.pub).
Log in to the drop zone (put files in /inbox, get results from /results):

  sftp %s %s

Upload a sample file (from the source tree) in batch mode, then fetch its result:

  echo 'put %s /inbox/' | sftp -b - %s %s
  sftp %s %s:/results/clean-first-run.result.csv .
`, d.dir, opts, target, sample, opts, target, opts, target)
	return nil
}

// demoHeld gives partner "demo-hr" November's payroll, locks the period as
// paid, and sends a late corrected file, so that the review console opens on
// real held exceptions (done once, when the partner is first added).
func demoHeld(ctx context.Context, d *demo) error {
	st := d.e.store
	err := st.AddPartner(ctx, records.Partner{ID: "demo-hr", Name: "Demo HR system (a late corrections file waits for review)"})
	if errors.Is(err, records.ErrExists) {
		return nil
	}
	if err != nil {
		return err
	}
	load := func(name string) (records.Envelope, error) {
		b, err := samplefiles.FS.ReadFile(name)
		if err != nil {
			return records.Envelope{}, fmt.Errorf("sample file %s: %w", name, err)
		}
		p := filepath.Join(d.dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return records.Envelope{}, fmt.Errorf("write %s: %w", p, err)
		}
		_, out, err := d.e.intake.IngestFile(ctx, "demo-hr", p, "demo")
		return out, err
	}
	if _, err := load("clean-first-run.csv"); err != nil {
		return err
	}
	if _, err := st.LockPeriod(ctx, "demo-hr", "2026-11", records.LockPaid, "demo"); err != nil {
		return err
	}
	env, err := load("corrected-resubmission.csv")
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, `
Partner "demo-hr" sent November's payroll, the period was locked as paid, then a late
corrected file arrived: %d row(s) are held for a reviewer.
`, env.Counts["held"])
	return nil
}

// demoReviewer adds reviewer "demo-reviewer" (its password printed once) and
// prints where the console is.
func demoReviewer(ctx context.Context, d *demo) error {
	const name = "demo-reviewer"
	password := review.NewPassword()
	hash, err := review.HashPassword(password)
	if err != nil {
		return err
	}
	err = d.e.store.AddReviewer(ctx, name, hash, nil)
	switch {
	case errors.Is(err, records.ErrExists):
		fmt.Fprintf(d.out, `
Review console: %s/review/ as %s (its password was printed when the demo first ran;
`+"`%s reviewer password %s`"+` sets a new one).
`, d.httpURL, name, d.cli, name)
		return nil
	case err != nil:
		return err
	}
	fmt.Fprintf(d.out, `
Review console (approve or reject the held rows, one by one or all at once):

  %s/review/
  reviewer: %s
  password (shown once): %s
`, d.httpURL, name, password)
	return nil
}

// demoAPI issues an API token for partner "demo" and prints a ready curl line.
func demoAPI(ctx context.Context, d *demo) error {
	tok, err := d.e.store.IssueAPIToken(ctx, "demo")
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, `
HTTP API token of partner "demo" (shown once). Submit a file (from the source tree):

  curl -sS -X POST '%s/v1/submissions?name=messy-export.csv' -H 'Authorization: Bearer %s' -H 'Idempotency-Key: demo-messy-export-1' --data-binary @sample-files/messy-export.csv
`, d.httpURL, tok)
	return nil
}

// demoWebhook adds a webhook secret for partner "demo" and prints a signed
// delivery: the body, its Standard Webhooks signature made with openssl, and
// the curl that sends it.
func demoWebhook(ctx context.Context, d *demo) error {
	secret, err := d.e.store.AddWebhookSecret(ctx, "demo")
	if err != nil {
		return err
	}
	key := strings.TrimPrefix(secret, "whsec_")
	fmt.Fprintf(d.out, `
Webhook secret of partner "demo" (shown once): %s
Send one signed pay-line change (Standard Webhooks: HMAC-SHA256 of "id.timestamp.body"):

  body='{"entity_id":"demo-E00107-BASE","version":1,"employee_ref":"E00107","pay_period":"2026-12","component":"BASE","amount":"3100.00","currency":"USD"}'
  id=msg_demo_1; ts=$(date +%%s)
  sig=$(printf '%%s' "$id.$ts.$body" | openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf '%%s' '%s' | base64 -d | od -An -v -tx1 | tr -d ' \n') -binary | base64)
  curl -sS -X POST '%s/v1/webhooks/demo' -H "webhook-id: $id" -H "webhook-timestamp: $ts" -H "webhook-signature: v1,$sig" -H 'Content-Type: application/json' -d "$body"

`, secret, key, d.httpURL)
	return nil
}

// shellQuote quotes a path for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
