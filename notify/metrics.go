package notify

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the notifications' operator-facing series, registered on the
// caller's registry (never the global default).
type Metrics struct {
	deliveries *prometheus.CounterVec
	answers    *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_notify_deliveries_total",
			Help: "Notification attempts by result: delivered (2xx), retried (to be sent again after a delay), failed (retries exhausted or an answer that is not retried; `payintake notify redeliver`).",
		}, []string{"result"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_notify_requests_total",
			Help: "Notification POSTs by the HTTP status of the partner's answer (no_answer: a timeout or a refused or dropped connection).",
		}, []string{"status"}),
	}
	for _, r := range []string{"delivered", "retried", "failed"} {
		m.deliveries.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.answers)
	}
	return m
}

func (m *Metrics) observe(r result) {
	switch r.state {
	case StateDelivered:
		m.deliveries.WithLabelValues("delivered").Inc()
	case StatePending:
		m.deliveries.WithLabelValues("retried").Inc()
	default:
		m.deliveries.WithLabelValues("failed").Inc()
	}
	if !r.sent {
		return // nothing was sent, so there is no answer to count
	}
	status := "no_answer"
	if r.status != 0 {
		status = strconv.Itoa(r.status)
	}
	m.answers.WithLabelValues(status).Inc()
}
