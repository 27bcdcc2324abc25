package consumer_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqsonce/sqsonce/consumer"
)

// BenchmarkDispatchTelemetry: BenchmarkDispatchStandard with both
// providers on, as in production but exporting nowhere (every span
// sampled and batched to a no-op exporter; metrics aggregated for a reader
// that is never collected). Compare its ns/op with
// BenchmarkDispatchStandard's for the per-message overhead of telemetry.
func BenchmarkDispatchTelemetry(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()

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
