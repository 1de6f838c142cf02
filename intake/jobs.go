package intake

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// River is asked about envelope processing jobs through its client API
// (JobList with kind, state and metadata filters), never through its
// tables: its schema is River's to change.

// jobPage is how many jobs one JobList call returns (River's maximum).
const jobPage = 10_000

// eachProcessJob calls fn for every envelope processing job in one of
// states (optionally only those whose metadata contains meta, a JSON
// object), page by page, in tx when tx is not nil.
func eachProcessJob(ctx context.Context, c *river.Client[pgx.Tx], tx pgx.Tx, meta string,
	fn func(job *rivertype.JobRow, args ProcessArgs) error, states ...rivertype.JobState) error {
	params := river.NewJobListParams().Kinds(ProcessArgs{}.Kind()).States(states...).First(jobPage)
	if meta != "" {
		params = params.Metadata(meta)
	}
	for {
		var res *river.JobListResult
		var err error
		if tx != nil {
			res, err = c.JobListTx(ctx, tx, params)
		} else {
			res, err = c.JobList(ctx, params)
		}
		if err != nil {
			return fmt.Errorf("list envelope processing jobs: %w", err)
		}
		for _, job := range res.Jobs {
			var args ProcessArgs
			if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
				return fmt.Errorf("job %d: read its arguments: %w", job.ID, err)
			}
			if err := fn(job, args); err != nil {
				return err
			}
		}
		if len(res.Jobs) < jobPage {
			return nil
		}
		params = params.After(res.LastCursor)
	}
}

// jobCover is what the processing jobs say of the envelopes still received.
type jobCover struct {
	// covered: a job will run, or ran within OrphanAfter (a live process
	// may still be working it), or was given up (discarded or cancelled):
	// no sweep queues such an envelope again.
	covered map[int64]bool
	// givenUp: a job was discarded or cancelled and none is waiting or
	// running: the envelope waits for an operator.
	givenUp map[int64]bool
}

var coverStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateScheduled, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateDiscarded, rivertype.JobStateCancelled,
}

// coverOf lists the processing jobs not completed (in tx, whose clock is
// now) and sorts their envelopes: a running job counts as live only if it
// started within after (else its process died).
func coverOf(ctx context.Context, c *river.Client[pgx.Tx], tx pgx.Tx, now time.Time, after time.Duration) (jobCover, error) {
	jc := jobCover{covered: map[int64]bool{}, givenUp: map[int64]bool{}}
	waiting := map[int64]bool{} // a job waits or runs (however long)
	err := eachProcessJob(ctx, c, tx, "", func(job *rivertype.JobRow, args ProcessArgs) error {
		id := args.EnvelopeID
		switch job.State {
		case rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
			jc.covered[id], jc.givenUp[id] = true, true
		case rivertype.JobStateRunning:
			waiting[id] = true
			if job.AttemptedAt != nil && job.AttemptedAt.After(now.Add(-after)) {
				jc.covered[id] = true
			}
		default:
			waiting[id], jc.covered[id] = true, true
		}
		return nil
	}, coverStates...)
	for id := range waiting {
		delete(jc.givenUp, id)
	}
	return jc, err
}

func keys(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// partnerMeta is the metadata every processing job carries, so the jobs of
// one partner can be found (JobListParams.Metadata).
func partnerMeta(partner string) []byte {
	b, _ := json.Marshal(map[string]string{"partner": partner})
	return b
}
