package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/IBM/pgxpoolprometheus"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/internal/observe"
)

// scrapeTimeout bounds the database queries of one /metrics scrape.
const scrapeTimeout = 2 * time.Second

// registerDBMetrics adds what serve reads from the database at scrape time:
// the connection pool's statistics (pgxpool_* from IBM's maintained
// collector) and the processing backlog.
func registerDBMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) {
	reg.MustRegister(pgxpoolprometheus.NewCollector(pool, map[string]string{"pool": "payintake"}),
		intake.NewQueueCollector(pool, scrapeTimeout))
}

// metricsHandler serves reg; a collector that fails (the database slow or
// away) is reported in the scrape and the other metrics are still served.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorHandling: promhttp.ContinueOnError})
}

// observeHTTP wraps serve's whole HTTP handler: every request is counted by
// route, method and status, timed, logged once and given a request id.
// With tracing on, each request is a span too.
func observeHTTP(h http.Handler, reg prometheus.Registerer, log *slog.Logger, tp trace.TracerProvider) http.Handler {
	return observe.Middleware(h, observe.NewHTTPMetrics(reg), log, tp)
}
