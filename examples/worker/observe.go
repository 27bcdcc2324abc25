package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsonce/sqsonce/opshttp/prom"
)

// observability is the worker's telemetry: the providers its components
// report to and, when the worker serves HTTP, the /metrics page.
type observability struct {
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	metrics *prom.Exporter // nil: no /metrics
	stop    []func(context.Context) error
}

// otlpWanted reports whether the standard OTEL_* variables ask for OTLP
// export of signal ("TRACES" or "METRICS").
func otlpWanted(getenv func(string) string, signal string) bool {
	switch getenv("OTEL_" + signal + "_EXPORTER") {
	case "otlp":
		return true
	case "none":
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

// newObservability sets up the providers: a Prometheus page when serve is
// set, OTLP when the OTEL_* variables ask for it (the exporters read the
// rest of their settings, endpoint, headers and protocol options, from
// them).
func newObservability(ctx context.Context, serve bool, getenv func(string) string) (*observability, error) {
	o := &observability{}
	var readers []sdkmetric.Option
	if serve {
		exp, err := prom.New(prom.Config{})
		if err != nil {
			return nil, err
		}
		o.metrics = exp
		readers = append(readers, sdkmetric.WithReader(exp))
	}
	if otlpWanted(getenv, "METRICS") {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if len(readers) > 0 {
		mp := sdkmetric.NewMeterProvider(readers...)
		o.mp = mp
		o.stop = append(o.stop, mp.Shutdown)
	}
	if otlpWanted(getenv, "TRACES") {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		o.tp = tp
		o.stop = append(o.stop, tp.Shutdown)
	}
	return o, nil
}

// close flushes the exporters.
func (o *observability) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, stop := range o.stop {
		_ = stop(ctx)
	}
}
