package intake_test

import (
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/intake/intaketest"
	"github.com/payintake/payintake/records"
)

// The orphan sweep learns which envelopes have a job from River's API: an
// envelope whose job waits is left alone, one whose job was cancelled is
// left for an operator (payintake_envelopes_stuck), and one without a job
// is queued again, its job carrying its partner (as every processing job,
// so the worker can wake a partner's next file).
func TestSweepAsksRiverForJobs(t *testing.T) {
	f := newFixture(t, records.Partner{})
	if err := intake.MigrateQueue(f.ctx, f.store.Pool()); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	q, err := intake.NewQueue(f.in, intake.NewMetrics(reg), intake.QueueConfig{Workers: 0}) // nothing is worked
	if err != nil {
		t.Fatal(err)
	}
	waits := f.receive(q, f.partner, "waits.csv", smallFile)
	given := f.receive(q, f.partner, "given-up.csv", smallFile+"E2,2026-11,BASE,1.00,USD\n")
	var none records.Envelope
	{
		path := f.dir + "/none.csv"
		if err := os.WriteFile(path, []byte(smallFile+"E3,2026-11,BASE,1.00,USD\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if none, err = f.store.Receive(f.ctx, records.Incoming{PartnerID: f.partner, FileName: "none.csv", Source: "test", Path: path}, nil); err != nil {
			t.Fatal(err)
		}
	}

	rc := f.riverClient()
	jobs := f.processJobs()
	if len(jobs) != 2 || jobs[waits.ID] == nil || jobs[given.ID] == nil {
		t.Fatalf("jobs found by partner: %v, want those of envelopes %d and %d", jobs, waits.ID, given.ID)
	}
	if _, err := rc.JobCancel(f.ctx, jobs[given.ID].ID); err != nil {
		t.Fatal(err)
	}

	// The envelopes are older than the sweep's "after": their arrival is
	// moved a second back rather than waited for.
	if _, err := f.store.Pool().Exec(f.ctx, `UPDATE envelopes SET received_at = received_at - interval '1 second' WHERE partner_id = $1`, f.partner); err != nil {
		t.Fatal(err)
	}
	n, err := q.RequeueOrphans(f.ctx, f.store.Pool(), time.Millisecond)
	if err != nil || n != 1 {
		t.Fatalf("requeued %d (%v), want 1: the envelope without a job", n, err)
	}
	jobs = f.processJobs()
	if j := jobs[none.ID]; j == nil || j.State != rivertype.JobStateAvailable {
		t.Fatalf("envelope %d has no waiting job with its partner after the sweep: %v", none.ID, jobs)
	}
	if jobs[waits.ID].State != rivertype.JobStateAvailable || jobs[given.ID].State != rivertype.JobStateCancelled {
		t.Errorf("jobs changed by the sweep: %s, %s", jobs[waits.ID].State, jobs[given.ID].State)
	}
	if stuck := gauge(t, reg, "payintake_envelopes_stuck"); stuck != 1 {
		t.Errorf("payintake_envelopes_stuck %v, want 1 (the cancelled job's envelope)", stuck)
	}
	// Nothing is requeued twice.
	if n, err := q.RequeueOrphans(f.ctx, f.store.Pool(), time.Millisecond); err != nil || n != 0 {
		t.Errorf("second sweep requeued %d (%v), want 0", n, err)
	}
	var requeues int
	if err := f.store.Pool().QueryRow(f.ctx, `SELECT coalesce(sum(requeues), 0) FROM envelope_attempts`).Scan(&requeues); err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	if requeues != 1 {
		t.Errorf("requeues recorded: %d, want 1", requeues)
	}
}

// riverClient asks River about the fixture's jobs through its client API,
// as intake does (never through its tables); it works none.
func (f *fixture) riverClient() *river.Client[pgx.Tx] {
	f.t.Helper()
	rc, err := river.NewClient(riverpgxv5.New(f.store.Pool()), &river.Config{})
	if err != nil {
		f.t.Fatal(err)
	}
	return rc
}

// processJobs lists the fixture partner's envelope processing jobs by
// envelope; an envelope with two fails the test.
func (f *fixture) processJobs() map[int64]*rivertype.JobRow {
	f.t.Helper()
	out := map[int64]*rivertype.JobRow{}
	for _, j := range intaketest.ProcessJobs(f.t, f.store.Pool(), f.partner) {
		if prev := out[j.Args.EnvelopeID]; prev != nil {
			f.t.Fatalf("envelope %d has two processing jobs: %d and %d", j.Args.EnvelopeID, prev.ID, j.ID)
		}
		out[j.Args.EnvelopeID] = j.JobRow
	}
	return out
}
