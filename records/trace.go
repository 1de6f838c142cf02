package records

import (
	"context"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName names the spans payintake's processing makes.
const TracerName = "github.com/payintake/payintake"

// queryTracer is the pgx tracer of the pool: the caller's observer
// (Options.QueryTracer), and OpenTelemetry spans for every statement run
// inside a recorded span (otelpgx: the SQL text, never its arguments), both
// when both are set.
func queryTracer(observer pgx.QueryTracer, tp trace.TracerProvider) pgx.QueryTracer {
	var ts []pgx.QueryTracer
	if observer != nil {
		ts = append(ts, observer)
	}
	if _, off := tp.(noop.TracerProvider); tp != nil && !off {
		ts = append(ts, otelpgx.NewTracer(otelpgx.WithTracerProvider(tp), otelpgx.WithDisableConnectionDetailsInAttributes()))
	}
	switch len(ts) {
	case 0:
		return nil
	case 1:
		return ts[0]
	}
	return multitracer.New(ts...)
}

// Tracer starts the spans of a new envelope (receive) and its processing.
func (s *Store) Tracer() trace.Tracer { return s.tracer }

// startSpan starts a child span of the span in ctx (none when ctx is not
// traced).
func StartSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(TracerName).Start(ctx, name, trace.WithAttributes(attrs...))
}

// EndSpan ends span, marking it failed when err is not nil.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
