package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// Orphaned envelopes.
//
// The lease on an envelope is the row lock its processing transaction takes
// (apply.Engine.Open: SELECT … FOR NO KEY UPDATE): it lasts exactly as long as
// the processing, and PostgreSQL drops it the moment the processing
// connection goes away, whatever killed the process. River, for its part,
// leaves the job of a killed process "running" until its rescue (longer
// than the longest legitimate job), which after a crash would leave a
// received file waiting for half an hour.
//
// So each serve process with workers also sweeps (SweepOrphans): an envelope
// still "received" after OrphanAfter whose row nobody holds, and that has no
// job waiting to run nor one started within OrphanAfter, was left by a
// process that died (or lost its job some other way). It gets a new job, in
// the same transaction that holds its row, and is processed at once. Doing
// that for an envelope that did not need it is harmless: Process is
// idempotent, and a second job finds the envelope done.
//
// A file that kills its processor every time must not be retried in a loop:
// each requeue is counted (envelope_attempts), the next one waits twice as
// long as the one before (OrphanAfter × 2^requeues), and after
// MaxRequeues the envelope is left for an operator, as is one whose job was
// discarded after River's MaxAttempts failures (each retried later than the
// one before, see processWorker.NextRetry). Both are logged and counted in
// payintake_envelopes_stuck.
//
// Which envelopes have a job is asked of River (coverOf: JobList), not of
// its tables; the envelopes it covers are left out of Orphans
// (recover.sql).
var (
	sqlNow          = query("Now")
	sqlOrphans      = query("Orphans")
	sqlCountRequeue = query("CountRequeue")
	sqlCountStuck   = query("CountStuck")
)

// MaxRequeues is how many times the sweep queues one envelope again before
// leaving it for an operator.
const MaxRequeues = 5

// Defaults of serve's --orphan-after (the sweep runs every quarter of it)
// and --job-timeout.
const (
	DefaultOrphanAfter = 30 * time.Second
	DefaultJobTimeout  = defaultJobTimeout
)

// RequeueOrphans gives a new job to every orphaned envelope (see above) and
// returns how many.
func (q *Queue) RequeueOrphans(ctx context.Context, pool *pgxpool.Pool, after time.Duration) (int, error) {
	type orphan struct {
		ID       int64
		Partner  string
		Requeues int
	}
	var found []orphan
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var now time.Time // the transaction's clock, as now() in Orphans
		if err := tx.QueryRow(ctx, sqlNow).Scan(&now); err != nil {
			return err
		}
		cover, err := coverOf(ctx, q.client, tx, now, after)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlOrphans, after, MaxRequeues, keys(cover.covered))
		if err != nil {
			return err
		}
		if found, err = pgx.CollectRows(rows, pgx.RowToStructByPos[orphan]); err != nil {
			return err
		}
		for _, o := range found {
			if _, err := tx.Exec(ctx, sqlCountRequeue, o.ID); err != nil {
				return err
			}
			if _, err := q.client.InsertTx(ctx, tx, ProcessArgs{EnvelopeID: o.ID}, &river.InsertOpts{Metadata: partnerMeta(o.Partner)}); err != nil {
				return err
			}
			delete(cover.givenUp, o.ID) // it has a job again
		}
		return q.m.countStuck(ctx, tx, keys(cover.givenUp))
	})
	if err != nil {
		return 0, fmt.Errorf("look for envelopes left by a stopped process: %w", err)
	}
	for _, o := range found {
		if o.Requeues+1 >= MaxRequeues {
			q.log.ErrorContext(ctx, "envelope left unprocessed by a stopped process again: queued one last time; if it stops its processor once more it is left for an operator (send the file again with payintake ingest to process it in the foreground)",
				"envelope", o.ID, "requeues", o.Requeues+1)
			continue
		}
		q.log.WarnContext(ctx, "envelope left unprocessed by a stopped process: queued again", "envelope", o.ID,
			"requeues", o.Requeues+1, "next_after", after*time.Duration(1<<(o.Requeues+1)))
	}
	return len(found), nil
}

// SweepOrphans runs RequeueOrphans every after/4 until ctx is done. A
// failed sweep (the database unreachable) is logged and tried again.
func (q *Queue) SweepOrphans(ctx context.Context, pool *pgxpool.Pool, after time.Duration) {
	if after <= 0 {
		after = DefaultOrphanAfter
	}
	t := time.NewTicker(max(after/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		if _, err := q.RequeueOrphans(ctx, pool, after); err != nil && ctx.Err() == nil {
			q.log.ErrorContext(ctx, "sweep for orphaned envelopes failed; trying again later", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
