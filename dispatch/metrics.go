package dispatch

import "github.com/prometheus/client_golang/prometheus"

// Metrics are dispatch's operator-facing series, registered on the caller's
// registry (never the global default).
type Metrics struct {
	lines          *prometheus.CounterVec
	requests       *prometheus.CounterVec
	retryDelay     prometheus.Histogram
	runsInProgress prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_dispatch_lines_total",
			Help: "Line outcomes recorded from vendor answers: succeeded, retried (sent again later), dead_letter, conflict (request-hash conflict: not sent).",
		}, []string{"result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_dispatch_requests_total",
			Help: "Requests to payroll vendors by HTTP status (no_answer: a timeout or a dropped connection).",
		}, []string{"status"}),
		retryDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "payintake_dispatch_retry_delay_seconds",
			Help:    "Delays waited before sending a chunk again.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		runsInProgress: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payintake_dispatch_runs_in_progress",
			Help: "Dispatch runs being sent by this process now.",
		}),
	}
	// Every result and the common statuses exist from the start at 0, so an
	// alert on their increase sees the first one.
	for _, r := range []string{"succeeded", "retried", "dead_letter", "conflict"} {
		m.lines.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.lines, m.requests, m.retryDelay, m.runsInProgress)
	}
	return m
}
