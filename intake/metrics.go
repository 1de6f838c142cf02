package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/records"
)

// Metrics are the operator-facing counters of the drop zone and the workers,
// registered on a registry of the caller's (never the global default).
type Metrics struct {
	uploads       *prometheus.CounterVec
	uploadBytes   prometheus.Counter
	uploadStored  *prometheus.CounterVec
	downloads     prometheus.Counter
	downloadBytes prometheus.Counter
	envelopes     *prometheus.CounterVec
	rows          *prometheus.CounterVec
	processing    prometheus.Histogram
	latency       prometheus.Histogram
	logins        *prometheus.CounterVec
	sessions      prometheus.Gauge
	failures      prometheus.Counter
	stuck         prometheus.Gauge
	idleClosed    prometheus.Counter
	loginsClosed  *prometheus.CounterVec
	partnerBusy   prometheus.Counter
	webhooks      *prometheus.CounterVec
	pgpFiles      *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_sftp_uploads_total",
			Help: "SFTP uploads by result: received (a new envelope), replay, key_reuse, incomplete (connection dropped), too_large, failed.",
		}, []string{"result"}),
		uploadStored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_sftp_upload_stored_total",
			Help: "SFTP uploads recorded as envelopes by how their bytes reached the database: streamed (while they arrived) or at_close (from the spool after the last write: resumed, temp-named and renamed, or no stream free).",
		}, []string{"how"}),
		uploadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_sftp_upload_bytes_total",
			Help: "Bytes written by SFTP clients to upload handles.",
		}),
		downloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_sftp_downloads_total",
			Help: "Result files opened for download over SFTP.",
		}),
		downloadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_sftp_download_bytes_total",
			Help: "Result file bytes read by SFTP clients.",
		}),
		envelopes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_envelopes_total",
			Help: "Envelopes by source (sftp, http, cli: the ingest command) and outcome: processed, replay, key_reuse, incomplete.",
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
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_sftp_logins_total",
			Help: "SSH logins by result (ok, failed, unavailable: refused because keys could not be checked, too_many_sessions: the partner had --sftp-max-sessions open).",
		}, []string{"result"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payintake_sftp_connections",
			Help: "SSH connections currently logged in.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_processing_failures_total",
			Help: "Processing attempts of envelopes that failed (retried later, each after a longer wait).",
		}),
		stuck: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payintake_envelopes_stuck",
			Help: "Received envelopes no longer retried: their job failed every attempt, or the sweep queued them again too often. They wait for an operator.",
		}),
		idleClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_sftp_idle_closed_total",
			Help: "Logged-in SSH connections closed after --sftp-idle-timeout without traffic.",
		}),
		loginsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_sftp_prelogin_closed_total",
			Help: "Connections closed before login by the pre-login bounds: reason silent (sent nothing), evicted (a newer connection from the address needed the slot of an idle one), full (no slot within the wait).",
		}, []string{"reason"}),
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
		reg.MustRegister(m.uploads, m.uploadStored, m.uploadBytes, m.downloads, m.downloadBytes, m.envelopes, m.rows,
			m.processing, m.latency, m.logins, m.sessions, m.failures, m.stuck, m.idleClosed, m.loginsClosed,
			m.partnerBusy, m.pgpFiles)
	}
	return m
}

// Received counts an envelope of any door whose receipt decided its outcome
// (a replay or a key reuse); the others are counted when processed.
func (m *Metrics) Received(env records.Envelope) {
	if m == nil {
		return
	}
	if env.Status == records.StatusReplay || env.Status == records.StatusKeyReuse {
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

func uploadResult(status string) string {
	if status == records.StatusReceived {
		return "received"
	}
	return status
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
	if err := tx.QueryRow(ctx, stuckSQL, MaxRequeues, givenUp).Scan(&n); err != nil {
		return fmt.Errorf("count stuck envelopes: %w", err)
	}
	m.stuck.Set(float64(n))
	return nil
}
