package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// queueCollector reads the processing backlog from the database when
// Prometheus scrapes: what every replica shares, so any replica reports it.
type queueCollector struct {
	pool                  *pgxpool.Pool
	timeout               time.Duration
	waiting, oldest, jobs *prometheus.Desc
	ready                 *prometheus.Desc
}

// NewQueueCollector reports, at scrape time, the received envelopes waiting
// for processing, the age of the oldest of them, the processing jobs by
// state, and whether the database answered (payintake_ready); each scrape's queries are cancelled after timeout (the scrape then
// reports an error for these metrics and the others as usual).
func NewQueueCollector(pool *pgxpool.Pool, timeout time.Duration) prometheus.Collector {
	return &queueCollector{
		pool: pool, timeout: timeout,
		waiting: prometheus.NewDesc("payintake_envelopes_waiting",
			"Received envelopes not processed yet (their result is not available).", nil, nil),
		oldest: prometheus.NewDesc("payintake_oldest_waiting_envelope_age_seconds",
			"Age of the oldest received envelope not processed yet; 0 when none waits.", nil, nil),
		ready: prometheus.NewDesc("payintake_ready",
			"1 when the database answered this scrape's queries in time (what /readyz checks), else 0.", nil, nil),
		jobs: prometheus.NewDesc("payintake_processing_jobs",
			"Envelope processing jobs in the queue by state (available, scheduled, running, retryable).", []string{"state"}, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.oldest
	ch <- c.jobs
	ch <- c.ready
}

var jobStates = []string{"available", "scheduled", "running", "retryable"}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var waiting int64
	var age float64
	err := c.pool.QueryRow(ctx, `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(received_at)), 0)::float8
		FROM envelopes WHERE status = 'received'`).Scan(&waiting, &age)
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
	counts := map[string]int64{}
	rows, err := c.pool.Query(ctx, `SELECT state::text, count(*) FROM river_job
		WHERE kind = $1 AND state = ANY($2::river_job_state[]) GROUP BY state`, ProcessArgs{}.Kind(), jobStates)
	if err == nil {
		for rows.Next() {
			var s string
			var n int64
			if err = rows.Scan(&s, &n); err != nil {
				break
			}
			counts[s] = n
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		ready = 0
		ch <- prometheus.NewInvalidMetric(c.jobs, fmt.Errorf("count processing jobs: %w", err))
		return
	}
	for _, s := range jobStates {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(counts[s]), s)
	}
}
