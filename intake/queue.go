package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/payintake/payintake/records"
)

// ProcessArgs is the job that processes one received envelope. It is
// enqueued in the transaction that records the envelope, so an envelope is
// never durable without its job, nor a job without its envelope.
type ProcessArgs struct {
	EnvelopeID int64 `json:"envelope_id"`
	// Trace is the W3C trace context (traceparent) of the envelope's
	// receipt, so its processing joins the same trace (empty when not traced).
	Trace map[string]string `json:"trace,omitempty"`
}

// Kind names the job in River's tables.
func (ProcessArgs) Kind() string { return "payintake_process_envelope" }

// Job timing: a 1 GiB file is processed in minutes, not hours. A job that
// runs longer than JobTimeout is cancelled and retried; one whose process died
// is rescued rescueMargin after JobTimeout. Running a job twice is harmless:
// Intake.Process locks the envelope and does nothing once it is done.
const (
	defaultJobTimeout  = 30 * time.Minute
	rescueMargin       = 5 * time.Minute
	defaultMaxAttempts = 10
)

// defaultFetchCooldown is the least time between two fetches of new jobs by
// this process's workers. A received file's job is announced by
// LISTEN/NOTIFY when its transaction commits, and a worker fetches it at
// once unless it fetched less than the cooldown ago — which it usually has,
// since a worker that finishes a file fetches again. River's default, 100
// ms, adds tens of milliseconds (up to 100) between the commit of a
// received file and the start of its processing, a large share of a small
// file's latency; 10 ms adds a few (BenchmarkQueueHandoff measures it). A
// fetch is one indexed UPDATE of River's job table, made only when a job
// was announced or finished and a worker is free, so the cost is bounded
// by the jobs, not by time.
const defaultFetchCooldown = 10 * time.Millisecond

// QueueConfig tunes the background processing.
type QueueConfig struct {
	// Workers is the number of envelopes processed at once by this process;
	// 0 makes an insert-only queue (nothing processed here).
	Workers int
	// JobTimeout overrides the default above; the rescue of a job whose
	// process died follows it by rescueMargin.
	JobTimeout time.Duration
	// TestOnly shortens River's start-up jitter (tests only).
	TestOnly bool
	// FetchCooldown overrides defaultFetchCooldown (BenchmarkQueueHandoff
	// compares it with River's default).
	FetchCooldown time.Duration
	// Other work run by the same River client (intake knows nothing of it):
	// Register adds its workers, PeriodicJobs its periodic jobs, Queues its
	// queues (worked only when Workers > 0).
	Register     func(*river.Workers)
	PeriodicJobs []*river.PeriodicJob
	Queues       map[string]river.QueueConfig
}

// Queue runs envelope processing as River jobs on the payintake database.
type Queue struct {
	client  *river.Client[pgx.Tx]
	workers int
	log     *slog.Logger
	m       *Metrics
}

// MigrateQueue creates or updates River's own tables. Run it at start, after
// records.Migrate.
func MigrateQueue(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("job queue migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("apply job queue migrations: %w", err)
	}
	return nil
}

// NewQueue prepares the job queue. Call Start to begin processing (when
// cfg.Workers > 0) and Stop to finish.
func NewQueue(in *Intake, m *Metrics, cfg QueueConfig) (*Queue, error) {
	if m == nil {
		m = NewMetrics(nil)
	}
	if in.Metrics == nil {
		in.Metrics = m // every door's processing counts on the queue's metrics
	}
	workers := river.NewWorkers()
	w := &processWorker{in: in, m: m}
	river.AddWorker(workers, w)
	if cfg.Register != nil {
		cfg.Register(workers)
	}
	rc := &river.Config{
		Workers:              workers,
		Logger:               slog.New(quietRiver{in.Log.Handler()}).With("component", "queue"),
		JobTimeout:           orDefault(cfg.JobTimeout, defaultJobTimeout),
		RescueStuckJobsAfter: orDefault(cfg.JobTimeout, defaultJobTimeout) + rescueMargin,
		MaxAttempts:          defaultMaxAttempts,
		TestOnly:             cfg.TestOnly,
		// A job put back or woken (see partnerBusySnooze) is found within
		// this; River's default is 1 s.
		FetchPollInterval: 200 * time.Millisecond,
		FetchCooldown:     orDefault(cfg.FetchCooldown, defaultFetchCooldown),
	}
	if cfg.Workers > 0 {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}}
		for name, qc := range cfg.Queues {
			rc.Queues[name] = qc
		}
		rc.PeriodicJobs = cfg.PeriodicJobs
	}
	c, err := river.NewClient(riverpgxv5.New(in.Store.Pool()), rc)
	if err != nil {
		return nil, fmt.Errorf("job queue: %w", err)
	}
	w.client = c
	return &Queue{client: c, workers: cfg.Workers, log: in.Log, m: m}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Start begins working jobs in the background (if the queue has workers).
func (q *Queue) Start(ctx context.Context) error {
	if q.workers == 0 {
		return nil
	}
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("start job queue: %w", err)
	}
	return nil
}

// StopFetching makes this process take no new job, at once: the jobs
// waiting are left to the other processes, while the running ones go on
// until Stop. (River's Stop begins the stop, its producers no longer
// fetching, and returns when its context is done; the stop goes on, and
// Stop waits for it.)
func (q *Queue) StopFetching() {
	if q.workers == 0 {
		return
	}
	now, cancel := context.WithCancel(context.Background())
	cancel()
	_ = q.client.Stop(now)
}

// Stop waits for running jobs to finish, or until ctx is done: then the
// running jobs are cancelled, roll back, and are made available again at
// once, for any process (River puts a job its own stop interrupted back
// without counting the attempt).
func (q *Queue) Stop(ctx context.Context) error {
	if q.workers == 0 {
		return nil
	}
	if err := q.client.Stop(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			hard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return q.client.StopAndCancel(hard)
		}
		return fmt.Errorf("stop job queue: %w", err)
	}
	return nil
}

// Insert queues a job of other work registered on this client (QueueConfig.Register).
func (q *Queue) Insert(ctx context.Context, args river.JobArgs) error {
	if _, err := q.client.Insert(ctx, args, nil); err != nil {
		return fmt.Errorf("queue a %s job: %w", args.Kind(), err)
	}
	return nil
}

// Enqueue is the records.AfterInsert hook that schedules processing of a new
// envelope inside the transaction that records it.
func (q *Queue) Enqueue(ctx context.Context, tx pgx.Tx, env records.Envelope) error {
	args := ProcessArgs{EnvelopeID: env.ID}
	if trace.SpanContextFromContext(ctx).IsValid() {
		args.Trace = map[string]string{}
		propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(args.Trace))
	}
	if _, err := q.client.InsertTx(ctx, tx, args, &river.InsertOpts{Metadata: partnerMeta(env.PartnerID)}); err != nil {
		return fmt.Errorf("enqueue processing of envelope %d: %w", env.ID, err)
	}
	return nil
}

type processWorker struct {
	river.WorkerDefaults[ProcessArgs]
	in     *Intake
	m      *Metrics
	client *river.Client[pgx.Tx]
}

// Fairness between partners. A partner's files are applied one at a time
// (its advisory lock), so a worker that took a file of a partner whose
// other file is being applied would only sit idle while other partners'
// files wait. Instead it puts the job back (snoozed, which does not count
// as an attempt) and takes the next one: one partner occupies one worker
// however many files it sends. When a partner's file is done, the worker
// wakes that partner's next waiting job at once; the snooze (snoozeDelay) is
// the fallback when that wake-up is missed or the lock was held by something
// else (a webhook, a decision, an HTTP submission processed in its request).
const (
	partnerBusySnooze    = 250 * time.Millisecond
	partnerBusySnoozeMax = 4 * time.Second
)

func (w *processWorker) Work(ctx context.Context, job *river.Job[ProcessArgs]) error {
	if len(job.Args.Trace) > 0 {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(job.Args.Trace))
	}
	env, err := w.in.ProcessIfPartnerFree(ctx, job.Args.EnvelopeID) // counted by Process, once, by the call that applied it
	if errors.Is(err, records.ErrPartnerBusy) {
		w.m.partnerBusy.Inc()
		d := w.snoozeDelay(ctx, env.PartnerID, job.Args.EnvelopeID)
		w.in.Log.DebugContext(ctx, "partner busy with another file; job put back", "envelope", job.Args.EnvelopeID,
			"partner", env.PartnerID, "retry_in", d)
		return river.JobSnooze(d)
	}
	if err == nil {
		defer w.wakeNext(ctx, env.PartnerID)
	}
	if errors.Is(err, records.ErrBusy) {
		// Another transaction is processing the envelope (an HTTP request,
		// or a second job for it): it finishes it, and if it dies instead,
		// the envelope is unheld again and the orphan sweep queues it anew.
		w.in.Log.DebugContext(ctx, "envelope being processed elsewhere; job done", "envelope", job.Args.EnvelopeID)
		return nil
	}
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// Cut by this process's stop (a timeout is DeadlineExceeded): not a
		// failure of the file. Returning the context's error lets River put
		// the job back at once, the attempt not counted, for any process.
		w.in.Log.InfoContext(ctx, "processing cut by this process's stop; the file goes back to the queue", "envelope", job.Args.EnvelopeID)
		return ctx.Err()
	}
	if err != nil {
		w.m.failures.Inc()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := w.in.Store.RecordFailure(rctx, job.Args.EnvelopeID, err); rerr != nil {
			w.in.Log.WarnContext(ctx, "could not record a processing failure", "envelope", job.Args.EnvelopeID, "err", rerr)
		}
		if job.Attempt >= job.MaxAttempts {
			w.in.Log.ErrorContext(ctx, "envelope processing failed for the last time; it is left for an operator (send the file again with payintake ingest to process it in the foreground)",
				"envelope", job.Args.EnvelopeID, "attempt", job.Attempt, "err", err)
			return err
		}
		w.in.Log.ErrorContext(ctx, "envelope processing failed; it will be retried", "envelope", job.Args.EnvelopeID,
			"attempt", job.Attempt, "max_attempts", job.MaxAttempts, "retry_in", RetryDelay(job.Attempt), "err", err)
		return err
	}
	return nil
}

// FilesAhead (queue.sql): how many files of the partner wait before this one.
var sqlFilesAhead = query("FilesAhead")

// snoozeDelay is how long a job of a busy partner is put back: the
// partner's oldest waiting file is tried again every partnerBusySnooze, each
// later one partnerBusySnooze longer per file ahead of it, at most
// partnerBusySnoozeMax. A busy partner's queue so costs about one try per
// partnerBusySnooze, however many files it holds.
func (w *processWorker) snoozeDelay(ctx context.Context, partner string, id int64) time.Duration {
	var ahead int
	if err := w.in.Store.Pool().QueryRow(ctx, sqlFilesAhead, partner, id).Scan(&ahead); err != nil {
		return partnerBusySnoozeMax
	}
	return min(partnerBusySnooze*time.Duration(1+ahead), partnerBusySnoozeMax)
}

// wakeNext makes the partner's oldest put-back job (the one of its
// earliest envelope) available now. The partner's jobs are found by their
// metadata (Queue.Enqueue); one inserted without it starts after its snooze.
func (w *processWorker) wakeNext(ctx context.Context, partner string) {
	var next *rivertype.JobRow
	var nextEnvelope int64
	now := time.Now()
	err := eachProcessJob(ctx, w.client, nil, string(partnerMeta(partner)), func(job *rivertype.JobRow, args ProcessArgs) error {
		if job.ScheduledAt.After(now) && (next == nil || args.EnvelopeID < nextEnvelope) {
			next, nextEnvelope = job, args.EnvelopeID
		}
		return nil
	}, rivertype.JobStateAvailable, rivertype.JobStateScheduled)
	if err == nil && next == nil {
		return
	}
	if err == nil {
		_, err = w.client.JobRetry(ctx, next.ID)
	}
	if err != nil && ctx.Err() == nil {
		w.in.Log.WarnContext(ctx, "could not wake the partner's next file; it starts after its snooze", "partner", partner, "err", err)
	}
}

// NextRetry spaces a failed envelope's retries out: retryDelay after the
// attempt that failed, so a file that fails (or is cancelled at
// --job-timeout) is not retried at once, and its 10 attempts span hours.
func (w *processWorker) NextRetry(job *river.Job[ProcessArgs]) time.Time {
	return time.Now().Add(RetryDelay(job.Attempt))
}

// RetryDelay is 2 s after the first failure, then four times longer each
// time, at most an hour: 2 s, 8 s, 32 s, 2 min, 8.5 min, 34 min, 1 h, ….
func RetryDelay(attempt int) time.Duration {
	d := 2 * time.Second
	for i := 1; i < attempt && d < time.Hour; i++ {
		d *= 4
	}
	return min(d, time.Hour)
}

// quietRiver writes River's info lines (its maintenance services' periodic
// "ran successfully", producer job counts, client started) at debug: they
// are chatter for an operator. Warnings and errors keep their level.
type quietRiver struct{ slog.Handler }

func riverLevel(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return min(l, slog.LevelDebug)
	}
	return l
}

func (h quietRiver) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, riverLevel(l))
}

func (h quietRiver) Handle(ctx context.Context, r slog.Record) error {
	r.Level = riverLevel(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h quietRiver) WithAttrs(as []slog.Attr) slog.Handler {
	return quietRiver{h.Handler.WithAttrs(as)}
}

func (h quietRiver) WithGroup(g string) slog.Handler { return quietRiver{h.Handler.WithGroup(g)} }
