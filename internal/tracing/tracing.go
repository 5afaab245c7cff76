// Package tracing is the process's OpenTelemetry tracing: an OTLP/HTTP exporter when the
// configuration names a collector (otel.endpoint), and nothing at all otherwise. It also holds
// the pieces that make spans: a pgx QueryTracer that turns every statement into a child span
// named after its sqlc query, and a slog.Handler that adds trace_id and span_id to log lines
// written inside a span.
//
// Tracing is off until Setup (or Install, in tests) turns it on. While it is off, Enabled is
// false and every part of this package returns at once: no spans, no allocations, one atomic
// load per database statement.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/better-compute/better-compute/internal/buildinfo"
)

// ServiceName is the service.name of every span.
const ServiceName = "better-compute"

// RolesAttribute is the resource attribute listing the roles of the process.
const RolesAttribute = attribute.Key("better_compute.roles")

// instrumentation names the tracer of this module's own spans.
const instrumentation = "github.com/better-compute/better-compute"

type state struct {
	provider   trace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

var current atomic.Pointer[state]

// Enabled reports whether spans are being recorded.
func Enabled() bool { return current.Load() != nil }

// Provider is the tracer provider in use, or nil while tracing is off.
func Provider() trace.TracerProvider {
	if s := current.Load(); s != nil {
		return s.provider
	}
	return nil
}

// Propagator reads and writes W3C trace context (and baggage) on requests.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

var noopTracer = noop.NewTracerProvider().Tracer(instrumentation)

// Tracer returns the tracer of Better Compute's own spans; a no-op tracer while tracing is off.
func Tracer() trace.Tracer {
	if s := current.Load(); s != nil {
		return s.tracer
	}
	return noopTracer
}

// Install turns tracing on with tp until the returned function is called, which turns it off
// again. Setup calls it; tests call it with an SDK provider over an in-memory exporter.
func Install(tp trace.TracerProvider) (uninstall func()) {
	s := &state{provider: tp, tracer: tp.Tracer(instrumentation), propagator: Propagator()}
	current.Store(s)
	return func() { current.CompareAndSwap(s, nil) }
}

// Options configure Setup.
type Options struct {
	// Endpoint is the OTLP/HTTP collector's URL (http or https); "/v1/traces" is appended when it
	// has no path. Empty leaves tracing off.
	Endpoint string
	// SampleRatio is the share of new traces recorded, from 0 to 1; spans whose parent was
	// sampled are always recorded.
	SampleRatio float64
	// Roles are the process's roles, recorded as the better_compute.roles resource attribute.
	Roles []string
	// InstanceID identifies the process (service.instance.id); optional.
	InstanceID string
	// Exporter replaces the OTLP exporter, for tests.
	Exporter sdktrace.SpanExporter
}

// Setup turns tracing on when opts name an endpoint (or an exporter): spans are batched to the
// collector, and the provider and W3C propagators also become OpenTelemetry's globals. The
// returned shutdown flushes the spans in flight and turns tracing off; without an endpoint
// Setup does nothing and shutdown is a no-op.
func Setup(ctx context.Context, opts Options) (shutdown func(context.Context) error, err error) {
	if opts.Endpoint == "" && opts.Exporter == nil {
		return func(context.Context) error { return nil }, nil
	}
	exp := opts.Exporter
	if exp == nil {
		u, err := exportURL(opts.Endpoint)
		if err != nil {
			return nil, err
		}
		if exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u)); err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
	}
	attrs := []attribute.KeyValue{
		semconv.ServiceName(ServiceName),
		semconv.ServiceVersion(buildinfo.Version),
		RolesAttribute.StringSlice(opts.Roles),
	}
	if opts.InstanceID != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(opts.InstanceID))
	}
	ratio := opts.SampleRatio
	if ratio < 0 || ratio > 1 {
		return nil, fmt.Errorf("tracing: sample ratio %v is not between 0 and 1", ratio)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(2*time.Second)),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
	uninstall := Install(tp)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	return func(ctx context.Context) error {
		uninstall()
		return tp.Shutdown(ctx)
	}, nil
}

// exportURL is the traces URL of an OTLP/HTTP endpoint: /v1/traces when it names no path.
func exportURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("tracing: the endpoint must be an absolute http or https URL like http://otel-collector:4318")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}
