package intake

import "github.com/prometheus/client_golang/prometheus"

func newWebhookMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payintake_webhook_deliveries_total",
		Help: "Webhook deliveries by result: the applied outcome (created, updated, unchanged, held, stale), replay (a redelivered webhook-id), quarantined (invalid body kept for audit), webhook_id_reuse, or the refusal code (signature_missing, signature_invalid, timestamp_invalid, timestamp_out_of_tolerance, invalid_webhook_id, body_too_large, body_unreadable, internal_error).",
	}, []string{"result"})
}

// Webhook counts one webhook delivery by its result (see the metric's help).
func (m *Metrics) Webhook(result string) {
	if m == nil {
		return
	}
	m.webhooks.WithLabelValues(result).Inc()
}
