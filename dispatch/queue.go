package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// The statements of queue.sql.
var (
	sqlPeriodsInProgress = query("PeriodsInProgress")
)

// QueueName is the River queue dispatch jobs run on, apart from envelope
// processing so that a long run never holds up files.
const QueueName = "dispatch"

// SweepEvery is how often serve looks for runs in progress that no
// dispatcher owns: a run opened by a lock or an approval (the trigger wrote
// it in that transaction; the run is the outbox) or one whose process died.
const SweepEvery = 2 * time.Second

// RunArgs is the job that dispatches a partner's period (all its runs in progress).
type RunArgs struct {
	Partner string `json:"partner"`
	Period  string `json:"pay_period"`
}

// Kind names the job in River's tables.
func (RunArgs) Kind() string { return "payintake_dispatch_run" }

// InsertOpts: at most one job per period per sweep interval. (Not one per
// period while running: the job of a process that died stays "running"
// until River rescues it, long after the sweep has found the period
// unowned and queued it anew.)
func (RunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueName, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: SweepEvery}}
}

// ArchiveArgs is the daily job that archives settled ledger rows older than 90 days.
type ArchiveArgs struct{}

// Kind names the job in River's tables.
func (ArchiveArgs) Kind() string { return "payintake_dispatch_archive" }

// InsertOpts puts the archive job on the dispatch queue.
func (ArchiveArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: QueueName} }

// Register adds dispatch's workers to a River client's workers.
func Register(w *river.Workers, d *Dispatcher) {
	river.AddWorker(w, &runWorker{d: d})
	river.AddWorker(w, &archiveWorker{d: d})
}

// PeriodicJobs is the daily archive (run by River's leader).
func PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(24*time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return ArchiveArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}),
	}
}

type runWorker struct {
	river.WorkerDefaults[RunArgs]
	d *Dispatcher
}

// Timeout: a run takes as long as the vendor needs (retries, Retry-After).
func (w *runWorker) Timeout(*river.Job[RunArgs]) time.Duration { return -1 }

func (w *runWorker) Work(ctx context.Context, job *river.Job[RunArgs]) error {
	_, err := w.d.Dispatch(ctx, job.Args.Partner, job.Args.Period)
	if errors.Is(err, ErrBusy) {
		return nil // another process owns the period; the sweep comes back if it dies
	}
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// Cut by this process's stop: the period is released (Dispatch's
		// unlock) and River puts the job back at once, the attempt not
		// counted, for any process; the lines in flight go again under
		// their keys.
		w.d.cfg.Log.InfoContext(ctx, "dispatch cut by this process's stop; the period goes back to the queue",
			"partner", job.Args.Partner, "pay_period", job.Args.Period)
		return ctx.Err()
	}
	if err != nil {
		w.d.cfg.Log.ErrorContext(ctx, "dispatch failed; it will be retried", "partner", job.Args.Partner,
			"pay_period", job.Args.Period, "attempt", job.Attempt, "err", err)
	}
	return err
}

// Sweep queues, every SweepEvery until ctx is done, a RunArgs job for every
// period with a run in progress that no dispatcher owns: runs just opened by
// a lock or an approval, and runs whose process died (resumed at once, not
// when River rescues the dead process's job). Every serve process with
// workers sweeps; a job that finds the period owned does nothing.
func Sweep(ctx context.Context, d *Dispatcher, insert func(context.Context, river.JobArgs) error) {
	t := time.NewTicker(SweepEvery)
	defer t.Stop()
	for {
		if err := d.sweep(ctx, insert); err != nil && ctx.Err() == nil {
			d.cfg.Log.ErrorContext(ctx, "dispatch sweep failed; trying again later", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (d *Dispatcher) sweep(ctx context.Context, insert func(context.Context, river.JobArgs) error) error {
	rows, err := d.st.pool.Query(ctx, sqlPeriodsInProgress)
	if err != nil {
		return fmt.Errorf("find runs in progress: %w", err)
	}
	var todo []RunArgs
	var a RunArgs
	if _, err := pgx.ForEachRow(rows, []any{&a.Partner, &a.Period}, func() error { todo = append(todo, a); return nil }); err != nil {
		return fmt.Errorf("find runs in progress: %w", err)
	}
	for _, a := range todo {
		if owned, err := d.owned(ctx, a.Partner, a.Period); err != nil || owned {
			continue // being dispatched (or the database is away: next sweep)
		}
		if err := insert(ctx, a); err != nil {
			return fmt.Errorf("queue the dispatch of period %s of partner %s: %w", a.Period, a.Partner, err)
		}
	}
	return nil
}

type archiveWorker struct {
	river.WorkerDefaults[ArchiveArgs]
	d *Dispatcher
}

func (w *archiveWorker) Work(ctx context.Context, job *river.Job[ArchiveArgs]) error {
	n, err := w.d.st.Archive(ctx, w.d.cfg.Now())
	if err != nil {
		return err
	}
	if n > 0 {
		w.d.cfg.Log.InfoContext(ctx, "dispatch ledger archived", "rows", n, "older_than", ArchiveAfter)
	}
	return nil
}
