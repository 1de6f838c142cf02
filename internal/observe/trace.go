package observe

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// traceID is the trace of ctx when it is recorded ("" otherwise).
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.IsSampled() {
		return sc.TraceID().String()
	}
	return ""
}

// TracingEnabled reports whether the OpenTelemetry environment asks for
// traces: an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none.
func TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// NewTracerProvider gives the tracer provider the environment asks for:
// tracing is off (a no-op provider) unless TracingEnabled; then spans are
// batched to the OTLP exporter configured by the standard variables
// (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT, _INSECURE,
// _CERTIFICATE, _COMPRESSION; _PROTOCOL http/protobuf, the default, or
// grpc), sampled per OTEL_TRACES_SAMPLER, with the resource of
// OTEL_SERVICE_NAME (default payintake) and OTEL_RESOURCE_ATTRIBUTES.
// shutdown flushes the spans still buffered.
func NewTracerProvider(ctx context.Context) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if !TracingEnabled(os.Getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: payintake exports traces over http/protobuf or grpc", proto)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("OpenTelemetry trace exporter: %w", err)
	}
	res, err := serviceResource(ctx)
	if err != nil {
		return nil, nil, err
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}

// serviceResource is what every span says of its sender: service.name
// payintake and service.version, the version this binary was built from
// (BuildInfo). OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (WithFromEnv)
// win over both.
func serviceResource(ctx context.Context) (*resource.Resource, error) {
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "payintake"),
		attribute.String("service.version", BuildInfo().Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	return res, nil
}
