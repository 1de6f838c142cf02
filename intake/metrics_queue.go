package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// queueCollector reads the processing backlog from the database when
// Prometheus scrapes: what every replica shares, so any replica reports it.
type queueCollector struct {
	pool                     *pgxpool.Pool
	jobs                     *river.Client[pgx.Tx] // insert-only: asked for its jobs (JobList)
	jobsErr                  error
	timeout                  time.Duration
	waiting, oldest, byState *prometheus.Desc
	ready                    *prometheus.Desc
}

// NewQueueCollector reports, at scrape time, the received envelopes waiting
// for processing, the age of the oldest of them, the processing jobs by
// state, and whether the database answered (payintake_ready); each scrape's queries are cancelled after timeout (the scrape then
// reports an error for these metrics and the others as usual).
func NewQueueCollector(pool *pgxpool.Pool, timeout time.Duration) prometheus.Collector {
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	return &queueCollector{
		pool: pool, timeout: timeout, jobs: jobs, jobsErr: err,
		waiting: prometheus.NewDesc("payintake_envelopes_waiting",
			"Received envelopes not processed yet (their result is not available).", nil, nil),
		oldest: prometheus.NewDesc("payintake_oldest_waiting_envelope_age_seconds",
			"Age of the oldest received envelope not processed yet; 0 when none waits.", nil, nil),
		ready: prometheus.NewDesc("payintake_ready",
			"1 when the database answered this scrape's queries in time (what /readyz checks), else 0.", nil, nil),
		byState: prometheus.NewDesc("payintake_processing_jobs",
			"Envelope processing jobs in the queue by state (available, scheduled, running, retryable).", []string{"state"}, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.oldest
	ch <- c.byState
	ch <- c.ready
}

// Waiting (queue.sql): the envelopes waiting and the age of the oldest.
var sqlWaiting = query("Waiting")

var jobStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateScheduled,
	rivertype.JobStateRunning, rivertype.JobStateRetryable}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var waiting int64
	var age float64
	err := c.pool.QueryRow(ctx, sqlWaiting).Scan(&waiting, &age)
	ready := 1.0
	defer func() { ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready) }()
	if err != nil {
		ready = 0
		err = fmt.Errorf("count waiting envelopes: %w", err)
		ch <- prometheus.NewInvalidMetric(c.waiting, err)
		ch <- prometheus.NewInvalidMetric(c.oldest, err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting))
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, max(age, 0))
	}
	// River has no count by kind: its jobs are listed (JobList) and counted.
	counts := map[rivertype.JobState]int64{}
	err = c.jobsErr
	if err == nil {
		err = eachProcessJob(ctx, c.jobs, nil, "", func(job *rivertype.JobRow, _ ProcessArgs) error {
			counts[job.State]++
			return nil
		}, jobStates...)
	}
	if err != nil {
		ready = 0
		ch <- prometheus.NewInvalidMetric(c.byState, fmt.Errorf("count processing jobs: %w", err))
		return
	}
	for _, s := range jobStates {
		ch <- prometheus.MustNewConstMetric(c.byState, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}
