package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

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
// the connection pool's statistics (pgxpool_*) and the processing backlog.
func registerDBMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) {
	reg.MustRegister(newPoolCollector(pool, "payintake"),
		intake.NewQueueCollector(pool, scrapeTimeout))
}

// metricsHandler serves reg; a collector that fails (the database slow or
// away) is reported in the scrape and the other metrics are still served.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorHandling: promhttp.ContinueOnError})
}

// readMetricsToken reads the bearer token /metrics requires from path ("":
// none). The file holds the token alone (surrounding whitespace ignored),
// as Prometheus's authorization.credentials_file does.
func readMetricsToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read --metrics-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("--metrics-token-file %s must hold one token of at least 16 characters without spaces (for example `openssl rand -hex 32`)", path)
	}
	return tok, nil
}

// protectMetrics lets only a scraper sending "Authorization: Bearer TOKEN"
// through (token "": everyone). The comparison takes the same time whatever
// the bytes sent.
func protectMetrics(h http.Handler, token string) http.Handler {
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="payintake metrics"`)
			http.Error(w, "metrics need the scrape token: send Authorization: Bearer TOKEN (the token of --metrics-token-file)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// observeHTTP wraps serve's whole HTTP handler: every request is counted by
// route, method and status, timed, logged once and given a request id.
// With tracing on, each request is a span too.
func observeHTTP(h http.Handler, reg prometheus.Registerer, log *slog.Logger, tp trace.TracerProvider) http.Handler {
	return observe.Middleware(h, observe.NewHTTPMetrics(reg), log, tp)
}
