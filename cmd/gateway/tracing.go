package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the gateway's tracer, as its instrumentation scope.
const tracerName = "github.com/sluicehq/sluice/cmd/gateway"

// serviceName is the service the gateway's spans name when OTEL_SERVICE_NAME does not.
const serviceName = "sluice-gateway"

// tracing is the gateway's tracer provider: its calls' spans go out over OTLP as the
// OpenTelemetry SDK's environment variables say. Its zero value traces nothing.
type tracing struct {
	provider *sdktrace.TracerProvider
}

// newTracing sets up tracing as the environment asks: OTLP to OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or wherever OTEL_TRACES_EXPORTER=otlp points by default),
// over HTTP/protobuf unless OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL says grpc, sampled as
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG say, batched as OTEL_BSP_* say, and named
// as OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say. With none of those set, with
// OTEL_TRACES_EXPORTER=none or with OTEL_SDK_DISABLED=true, it traces nothing. instance names
// this gateway (service.instance.id).
func newTracing(ctx context.Context, log *slog.Logger, instance string) (tracing, error) {
	if !tracingAsked() {
		return tracing{}, nil
	}
	exporter, err := newExporter(ctx)
	if err != nil {
		return tracing{}, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName), attribute.String("service.instance.id", instance)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return tracing{}, fmt.Errorf("tracing: describe the gateway: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	return tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))}, nil
}

// tracingAsked reports whether the environment asks for traces.
func tracingAsked() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch os.Getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true
}

// newExporter is the OTLP exporter the environment names: OTEL_TRACES_EXPORTER otlp, or unset,
// over the protocol of OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else
// http/protobuf. Each exporter reads its endpoint, headers, timeout, compression and TLS files
// from the environment itself.
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: the gateway exports over otlp, or none", e)
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	}
	return nil, fmt.Errorf("tracing: OTLP protocol %q: the gateway speaks http/protobuf or grpc", protocol)
}

// tracer is the gateway's tracer, or nil when it traces nothing.
func (t tracing) tracer() trace.Tracer {
	if t.provider == nil {
		return nil
	}
	return t.provider.Tracer(tracerName)
}

// shutdown sends the spans not sent yet and stops tracing, within ctx.
func (t tracing) shutdown(ctx context.Context) error {
	if t.provider == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}
