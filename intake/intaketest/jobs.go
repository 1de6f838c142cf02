// Package intaketest lists, for tests of intake and of the doors above it,
// the envelope processing jobs River holds, through River's own client.
package intaketest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/payintake/payintake/intake"
)

// ProcessJob is an envelope processing job and its arguments.
type ProcessJob struct {
	*rivertype.JobRow
	Args intake.ProcessArgs
}

// most is more jobs than a test queues: reaching it is a test gone wrong,
// not a page to read on.
const most = 1000

// ProcessJobs lists the envelope processing jobs in pool, of partner (""
// for every partner's, found by the partner each carries in its metadata),
// in states (none: in any), by id.
func ProcessJobs(t testing.TB, pool *pgxpool.Pool, partner string, states ...rivertype.JobState) []ProcessJob {
	t.Helper()
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	params := river.NewJobListParams().Kinds(intake.ProcessArgs{}.Kind()).First(most)
	if partner != "" {
		params = params.Metadata(fmt.Sprintf(`{"partner": %q}`, partner))
	}
	if len(states) > 0 { // none: River's default, every state
		params = params.States(states...)
	}
	res, err := rc.JobList(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) == most {
		t.Fatalf("%d processing jobs or more in states %v: the test queued more than it means to", most, states)
	}
	jobs := make([]ProcessJob, len(res.Jobs))
	for i, j := range res.Jobs {
		jobs[i].JobRow = j
		if err := json.Unmarshal(j.EncodedArgs, &jobs[i].Args); err != nil {
			t.Fatalf("job %d: %v", j.ID, err)
		}
	}
	return jobs
}
