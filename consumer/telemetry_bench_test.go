package consumer_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsonce/sqsonce/consumer"
)

// BenchmarkDispatchTelemetry: BenchmarkDispatchStandard with both
// providers on, as in production but exporting nowhere (every span
// sampled and batched to a no-op exporter; metrics aggregated for a reader
// that is never collected). Compare its ns/op with
// BenchmarkDispatchStandard's for the per-message overhead of telemetry.
func BenchmarkDispatchTelemetry(b *testing.B) {
	benchDispatchProviders(b, sdktrace.AlwaysSample(), true)
}

// BenchmarkDispatchTelemetrySampledOut: BenchmarkDispatchTelemetry with a
// sampler that drops every span.
func BenchmarkDispatchTelemetrySampledOut(b *testing.B) {
	benchDispatchProviders(b, sdktrace.NeverSample(), true)
}

// BenchmarkDispatchMetrics: BenchmarkDispatchTelemetry's MeterProvider
// alone.
func BenchmarkDispatchMetrics(b *testing.B) {
	benchDispatchProviders(b, nil, true)
}

// benchDispatchProviders runs BenchmarkDispatchStandard's consumer with a
// TracerProvider sampling with sampler (none when nil), batched to a no-op
// exporter, and, when metrics is set, a MeterProvider whose reader is
// never collected.
func benchDispatchProviders(b *testing.B, sampler sdktrace.Sampler, metrics bool) {
	var tp trace.TracerProvider
	var mp metric.MeterProvider
	if sampler != nil {
		sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer func() { _ = sdk.Shutdown(context.Background()) }()
		tp = sdk
	}
	if metrics {
		sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer func() { _ = sdk.Shutdown(context.Background()) }()
		mp = sdk
	}

	f := newBenchSQS(b.N, 0)
	c, err := consumer.New(consumer.Config{
		Client: f, QueueURL: f.url, DeadLetterQueueURL: f.url, Concurrency: 32,
		TracerProvider: tp, MeterProvider: mp,
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() { errc <- c.Run(ctx) }()
	<-f.done
	b.StopTimer()
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
