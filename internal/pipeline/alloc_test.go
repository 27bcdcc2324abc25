package pipeline

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sqsonce/sqsonce/internal/telemetry"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// TestProcessAllocations pins what the path allocates per message around
// a handler that does nothing: nothing of its own, with or without the
// busy count, and with telemetry whose sampler drops every span only what
// the OpenTelemetry SDK's Start must (telemetry.TestMessageAllocations:
// at most 3). No middleware closure is built per message for the span
// or the count.
func TestProcessAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	noop := sqsmsg.HandlerFunc(func(context.Context, *sqsmsg.Message) error { return nil })
	running := 0
	for _, tc := range []struct {
		name string
		cfg  func() Config
		max  float64
	}{
		{"plain", func() Config { return Config{Handler: noop} }, 0},
		{"busy", func() Config {
			return Config{Handler: noop, Observer: Busy(nil, func(d int) { running += d })}
		}, 0},
		{"sampled out", func() Config {
			return Instrument(Config{Handler: noop}, telemetry.NewConsumer(tp, mp, "https://sqs.us-east-1.amazonaws.com/123456789012/q"))
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.cfg())
			msg := &sqsmsg.Message{ID: "6f9c1d2e-msg", Body: "{}", ReceiveCount: 1}
			ctx := context.Background()
			got := testing.AllocsPerRun(1000, func() {
				if res := p.Process(ctx, msg); res.Outcome != sqsmsg.OutcomeAck {
					t.Fatalf("outcome %v, want ack", res.Outcome)
				}
			})
			if got > tc.max {
				t.Errorf("%s: %.1f allocations per message, want at most %.0f", tc.name, got, tc.max)
			}
			if running != 0 {
				t.Errorf("%d handlers still counted as running", running)
			}
		})
	}
}
