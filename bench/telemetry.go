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
// aggregated for a reader never collected), and with a TracerProvider
// whose sampler drops every span (the same MeterProvider), against the
// same consumer without them, the three interleaved. Each side runs under
// the profiler label side=off, side=on or side=sampled-out, so a
// -cpuprofile splits the CPU by side (the span batcher's goroutine is
// unlabelled).
func (b *bench) telemetryRows() ([]row, error) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	dropTP := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() {
		_ = tp.Shutdown(context.Background())
		_ = dropTP.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	}()
	off := runOpts{concurrency: 32}
	on := runOpts{concurrency: 32, tracerProvider: tp, meterProvider: mp}
	out := runOpts{concurrency: 32, tracerProvider: dropTP, meterProvider: mp}
	// The warm-up: each side once, discarded.
	for _, o := range []runOpts{off, on, out} {
		if _, err := b.sqsonceOnce("otel-warm", false, 0, o); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	type side struct{ rate, cpu, allocs sample }
	var offS, onS, outS side
	step := func(label, name string, o runOpts, s *side) func() error {
		return labelled(label, func() error {
			res, err := b.sqsonceOnce(name, false, 0, o)
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			s.rate, s.cpu, s.allocs = append(s.rate, res.rate), append(s.cpu, micros(res.cpu)), append(s.allocs, res.allocs)
			return nil
		})
	}
	for i := range b.runs {
		if err := inTurn(i, step("off", "otel-off", off, &offS), step("on", "otel-on", on, &onS), step("sampled-out", "otel-out", out, &outS)); err != nil {
			return nil, fmt.Errorf("run %d, %w", i+1, err)
		}
		fmt.Fprintf(b.errw, "bench:   telemetry: run %d of %d done\n", i+1, b.runs)
	}
	const g = "Telemetry"
	costCPU := onS.cpu.med() - offS.cpu.med()
	costAllocs := onS.allocs.med() - offS.allocs.med()
	outCPU := outS.cpu.med() - offS.cpu.med()
	outAllocs := outS.allocs.med() - offS.allocs.med()
	how := fmt.Sprintf("median (min–max) of %d interleaved runs per side (off, on, sampled out) after a warm-up of each; no-op handler, standard queue, conc 32, %s msgs per run; "+
		"on: TracerProvider (SDK, every span sampled, batched to a no-op exporter) and MeterProvider (SDK, manual reader never collected)", len(onS.rate), thousands(int64(b.n)))
	return []row{
		row{group: g, name: "no-op consumer, telemetry on vs off (throughput)", value: onS.rate, limit: offS.rate, ratio: ratios(onS.rate, offS.rate), unit: "msgs/s",
			note: how + "; limit: the same consumer without providers; target: a span and a few metric updates per message must cost next to nothing beside a no-op consumer's work, so ≥ 0.95"}.with(atLeast(0.95)),
		row{group: g, name: "Go CPU per message, telemetry on vs off", value: onS.cpu, limit: offS.cpu, ratio: ratios(onS.cpu, offS.cpu), unit: "µs",
			note: fmt.Sprintf("the same runs; this process's CPU per message (SDK calls and the span batcher included); telemetry costs %.1f µs per message (difference of the medians); "+
				"target: the span and metric work is a few µs next to the ~50 µs a message costs without it, so ≤ 1.15 (measure it: go test -bench BenchmarkMessage ./internal/telemetry/)", costCPU)}.with(atMost(1.15)),
		{group: g, name: "heap allocations per message, telemetry on vs off", value: onS.allocs, limit: offS.allocs, ratio: ratios(onS.allocs, offS.allocs), unit: "allocs",
			note: fmt.Sprintf("the same runs; this process's allocations per message (runtime.MemStats.Mallocs); telemetry adds %.1f per message; no target: the CPU row judges their cost", costAllocs)},
		row{group: g, name: "Go CPU per message, spans sampled out vs telemetry off", value: outS.cpu, limit: offS.cpu, ratio: ratios(outS.cpu, offS.cpu), unit: "µs",
			note: fmt.Sprintf("the same runs; sampled out: a TracerProvider (SDK) whose sampler drops every span, and the MeterProvider above; it costs %.1f µs and %.1f allocations per message (differences of the medians); "+
				"target: a span that is not recorded builds nothing, and the metrics' attribute sets are built once, so ≤ 1.03", outCPU, outAllocs)}.with(atMost(1.03)),
	}, nil
}
