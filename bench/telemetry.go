package main

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// telemetryRows: the no-op consumer with both OpenTelemetry providers on
// (the SDK, every span sampled and batched to a no-op exporter, metrics
// aggregated for a reader never collected) against the same consumer
// without them, interleaved.
func (b *bench) telemetryRows() ([]row, error) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	}()
	off := runOpts{concurrency: 32}
	on := runOpts{concurrency: 32, tracerProvider: tp, meterProvider: mp}
	// The warm-up: each side once, discarded.
	for _, o := range []runOpts{off, on} {
		if _, err := b.sqsonceOnce("otel-warm", false, 0, o); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	var offRate, offCPU, offAllocs, onRate, onCPU, onAllocs sample
	err := b.pairs("telemetry", b.runs, func() error {
		res, err := b.sqsonceOnce("otel-off", false, 0, off)
		offRate, offCPU, offAllocs = append(offRate, res.rate), append(offCPU, micros(res.cpu)), append(offAllocs, res.allocs)
		return err
	}, func(bool) error {
		res, err := b.sqsonceOnce("otel-on", false, 0, on)
		onRate, onCPU, onAllocs = append(onRate, res.rate), append(onCPU, micros(res.cpu)), append(onAllocs, res.allocs)
		return err
	}, false)
	if err != nil {
		return nil, err
	}
	const g = "Telemetry"
	costCPU := onCPU.med() - offCPU.med()
	costAllocs := onAllocs.med() - offAllocs.med()
	how := fmt.Sprintf("median (min–max) of %d interleaved runs per side after a warm-up of each; no-op handler, standard queue, conc 32, %s msgs per run; "+
		"on: TracerProvider (SDK, every span sampled, batched to a no-op exporter) and MeterProvider (SDK, manual reader never collected)", len(onRate), thousands(int64(b.n)))
	return []row{
		row{group: g, name: "no-op consumer, telemetry on vs off (throughput)", value: onRate, limit: offRate, ratio: ratios(onRate, offRate), unit: "msgs/s",
			note: how + "; limit: the same consumer without providers; target: one span and a few metric updates per message must not cost a tenth of a no-op consumer's rate, so ≥ 0.9"}.with(atLeast(0.9)),
		row{group: g, name: "Go CPU per message, telemetry on vs off", value: onCPU, limit: offCPU, ratio: ratios(onCPU, offCPU), unit: "µs",
			note: fmt.Sprintf("the same runs; this process's CPU per message (SDK calls included on both sides); telemetry costs %.1f µs per message (difference of the medians); "+
				"target: the span and metric work is a few µs next to the ~50 µs a message costs without it, so ≤ 1.3", costCPU)}.with(atMost(1.3)),
		{group: g, name: "heap allocations per message, telemetry on vs off", value: onAllocs, limit: offAllocs, ratio: ratios(onAllocs, offAllocs), unit: "allocs",
			note: fmt.Sprintf("the same runs; this process's allocations per message (runtime.MemStats.Mallocs); telemetry adds %.0f per message; no target: the CPU row judges their cost", costAllocs)},
	}, nil
}
