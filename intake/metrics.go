package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/records"
)

// Metrics are the operator-facing counters of the envelopes and the workers,
// registered on a registry of the caller's (never the global default).
type Metrics struct {
	envelopes   *prometheus.CounterVec
	rows        *prometheus.CounterVec
	processing  prometheus.Histogram
	latency     prometheus.Histogram
	failures    prometheus.Counter
	stuck       prometheus.Gauge
	partnerBusy prometheus.Counter
	webhooks    *prometheus.CounterVec
	pgpFiles    *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		envelopes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_envelopes_total",
			Help: "Envelopes by source (sftp, http, cli: the ingest command) and outcome: processed, replay (the same file again: a repeat), key_reuse, incomplete.",
		}, []string{"source", "outcome"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_rows_total",
			Help: "Rows of processed envelopes by source (sftp, http, cli) and outcome (created, updated, unchanged, held, stale, rejected).",
		}, []string{"source", "outcome"}),
		processing: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "payintake_envelope_processing_seconds",
			Help:    "Time to process one envelope (normalise, classify, apply, build the result).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "payintake_envelope_result_latency_seconds",
			Help:    "Time from an envelope being received to its result being available.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_processing_failures_total",
			Help: "Processing attempts of envelopes that failed (retried later, each after a longer wait).",
		}),
		stuck: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payintake_envelopes_stuck",
			Help: "Received envelopes no longer retried: their job failed every attempt, or the sweep queued them again too often. They wait for an operator.",
		}),
		partnerBusy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_jobs_put_back_total",
			Help: "Processing jobs put back because their partner was busy with another file (the worker took another partner's file instead).",
		}),
		webhooks: newWebhookMetric(),
		pgpFiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_pgp_files_total",
			Help: "OpenPGP uploads (and plain files where OpenPGP is required) at receipt, by result (ok, or the refusal's pgp_ code), the platform key that decrypted (fingerprint; none when not encrypted or refused) and the partner key whose signature verified (fingerprint; none when unsigned or refused). Fingerprints only, never key material.",
		}, []string{"result", "platform_key", "signer"}),
	}
	if reg != nil {
		reg.MustRegister(m.webhooks)
		reg.MustRegister(m.envelopes, m.rows, m.processing, m.latency, m.failures, m.stuck, m.partnerBusy, m.pgpFiles)
	}
	return m
}

// Received counts an envelope of any door whose receipt decided its outcome
// (a repeat or a key reuse); the others are counted when processed.
func (m *Metrics) Received(env records.Envelope) {
	if m == nil {
		return
	}
	if env.Status == records.StatusRepeat || env.Status == records.StatusKeyReuse {
		m.envelopes.WithLabelValues(env.Source, env.Status).Inc()
	}
}

// pgpFile counts an OpenPGP upload's receipt (rec nil: a plain file
// where OpenPGP is not required, not counted).
func (m *Metrics) pgpFile(rec *records.EnvelopePGP) {
	if m == nil || rec == nil {
		return
	}
	result := "ok"
	if rec.Refusal != nil {
		result = string(rec.Refusal.Code())
	}
	m.pgpFiles.WithLabelValues(result, orNone(rec.DecryptedWith), orNone(rec.Signer)).Inc()
}

func orNone(fp string) string {
	if fp == "" {
		return "none"
	}
	return fp
}

// Incomplete counts an upload of a door (source) cut off before it was
// received: it never became an envelope of its own.
func (m *Metrics) Incomplete(source string) {
	if m == nil {
		return
	}
	m.envelopes.WithLabelValues(source, records.StatusIncomplete).Inc()
}

// processed counts an envelope that this process processed (by any door:
// a worker, an HTTP request, the ingest command).
func (m *Metrics) processed(env records.Envelope, took time.Duration) {
	if m == nil {
		return
	}
	m.envelopes.WithLabelValues(env.Source, env.Status).Inc()
	for outcome, n := range env.Counts {
		m.rows.WithLabelValues(env.Source, outcome).Add(float64(n))
	}
	m.processing.Observe(took.Seconds())
	if !env.ReceivedAt.IsZero() {
		m.latency.Observe(time.Since(env.ReceivedAt).Seconds())
	}
}

// countStuck sets payintake_envelopes_stuck from the database.
func (m *Metrics) countStuck(ctx context.Context, tx pgx.Tx, givenUp []int64) error {
	var n int
	if err := tx.QueryRow(ctx, sqlCountStuck, MaxRequeues, givenUp).Scan(&n); err != nil {
		return fmt.Errorf("count stuck envelopes: %w", err)
	}
	m.stuck.Set(float64(n))
	return nil
}
