package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Orphaned envelopes.
//
// The lease on an envelope is the row lock its processing transaction takes
// (records.Store.Process: SELECT … FOR NO KEY UPDATE): it lasts exactly as long as
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
// idempotent, and a second job finds the envelope done. An envelope whose job
// was discarded after MaxAttempts failures is left for an operator (it is
// logged at every failure).
const orphansSQL = `
	SELECT e.id FROM envelopes e
	WHERE e.status = 'received' AND e.received_at < now() - $1::interval
	  AND NOT EXISTS (
		SELECT 1 FROM river_job j
		WHERE j.kind = 'payintake_process_envelope' AND (j.args->>'envelope_id')::bigint = e.id
		  AND (j.state IN ('available', 'pending', 'scheduled', 'retryable', 'discarded', 'cancelled')
		       OR (j.state = 'running' AND j.attempted_at > now() - $1::interval)))
	ORDER BY e.id
	LIMIT 100
	FOR NO KEY UPDATE OF e SKIP LOCKED`

// Defaults of serve's --orphan-after (the sweep runs every quarter of it)
// and --job-timeout.
const (
	DefaultOrphanAfter = 30 * time.Second
	DefaultJobTimeout  = defaultJobTimeout
)

// RequeueOrphans gives a new job to every orphaned envelope (see above) and
// returns how many.
func (q *Queue) RequeueOrphans(ctx context.Context, pool *pgxpool.Pool, after time.Duration) (int, error) {
	var ids []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, orphansSQL, after)
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := q.client.InsertTx(ctx, tx, ProcessArgs{EnvelopeID: id}, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("look for envelopes left by a stopped process: %w", err)
	}
	for _, id := range ids {
		q.log.WarnContext(ctx, "envelope left unprocessed by a stopped process: queued again", "envelope", id)
	}
	return len(ids), nil
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
