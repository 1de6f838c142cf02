package observe

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/payintake/payintake/internal/clientaddr"
)

// RequestIDHeader carries the request id: a sane one sent by the client is
// kept (so a proxy's id follows the request), any other is replaced by a new
// one; the response always has it.
const RequestIDHeader = "X-Request-Id"

// HTTPMetrics are the HTTP requests of every route: counted by route
// pattern, method and status, and timed.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewHTTPMetrics creates the metrics and registers them on reg (nil: not registered).
func NewHTTPMetrics(reg prometheus.Registerer) *HTTPMetrics {
	m := &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_http_requests_total",
			Help: "HTTP requests by route (the server's route pattern, never the raw path; unmatched for none), method and status code.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "payintake_http_request_duration_seconds",
			Help:    "Time from an HTTP request's headers read to its response written, by route and method.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14), // 5 ms .. 41 s
		}, []string{"route", "method"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}

// Middleware wraps the whole HTTP handler of a server (a ServeMux, whose
// matched pattern names the route): every request gets a request id (in
// its context and the X-Request-Id response header), is counted and timed
// in m, and is logged once when answered, with the notes its handler added
// (Note). Requests of no interest to an operator — a successful /metrics
// scrape or health check, a static file — are logged at debug; refusals
// (4xx) at warn, failures (5xx) at error, the rest at info.
//
// With a tracer provider (nil: none), each request is also a server span
// named by its method and route, continuing a client's W3C traceparent;
// what the request does (an envelope's receipt and processing) are its
// children, and its log lines carry its trace_id.
func Middleware(next http.Handler, m *HTTPMetrics, log *slog.Logger, tp trace.TracerProvider) http.Handler {
	if m == nil {
		m = NewHTTPMetrics(nil)
	}
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	tracer := tp.Tracer("github.com/payintake/payintake/internal/observe")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		req := &request{id: requestID(r.Header.Get(RequestIDHeader))}
		w.Header().Set(RequestIDHeader, req.id)
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer))
		ctx = context.WithValue(ctx, requestKey{}, req)
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			took := time.Since(start)
			route, method := Route(r.Pattern), Method(r.Method)
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			if v := recover(); v != nil {
				// The connection is cut (http.ErrAbortHandler, or a panic
				// the server logs): counted as the failure it is.
				if sw.status == 0 {
					status = http.StatusInternalServerError
				}
				defer panic(v)
			}
			span.SetName(method + " " + route)
			span.SetAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route),
				attribute.Int("http.response.status_code", status), attribute.String("payintake.request_id", req.id),
				attribute.String("client.address", clientaddr.From(r).String()))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			span.End()
			m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
			m.duration.WithLabelValues(route, method).Observe(took.Seconds())
			notes := req.attrs()
			level := slog.LevelInfo
			switch {
			case status >= 500:
				level = slog.LevelError
			case status >= 400:
				level = slog.LevelWarn
			case len(notes) == 0 && (route == "/metrics" || route == "/healthz" || route == "/readyz" ||
				strings.HasPrefix(route, "/review/static/") || route == "unmatched"):
				level = slog.LevelDebug
			}
			if !log.Enabled(ctx, level) {
				return
			}
			attrs := append([]slog.Attr{
				slog.String("request_id", req.id), slog.String("method", r.Method), slog.String("route", route),
				slog.String("path", r.URL.Path), slog.Int("status", status), slog.Duration("duration", took),
				slog.Int64("bytes", sw.bytes), slog.String("client", clientaddr.From(r).String()),
			}, notes...)
			if p := clientaddr.Proxy(r); p.IsValid() {
				attrs = append(attrs, slog.String("proxy", p.String()))
			}
			log.LogAttrs(ctx, level, "http request", attrs...)
		}()
		next.ServeHTTP(sw, r)
	})
}

// Route is a ServeMux pattern as a metric label: its path (the method and
// host left out), or "unmatched" when no pattern matched.
func Route(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = strings.TrimSpace(p)
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:] // host
	}
	return pattern
}

// Method is an HTTP method as a metric label: one of the standard methods,
// or "other" (a client cannot make up label values).
func Method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// requestID keeps a client's id of 1 to 64 letters, digits, '-', '_', '.'
// or ':' (a UUID, a proxy's id), else makes a new one (32 hex digits).
func requestID(in string) string {
	if len(in) > 0 && len(in) <= 64 && strings.IndexFunc(in, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':')
	}) < 0 {
		return in
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// statusWriter remembers the status and counts the body bytes; Unwrap lets
// http.ResponseController reach the connection's own writer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes through to the connection (streamed responses).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes through to the connection.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("the connection cannot be hijacked")
}
