package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsonce/sqsonce/internal/telemetry"
)

const testQueueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"

// discard is a span processor that keeps nothing and starts no
// goroutine, so that allocations counted around a span are the span's.
type discard struct{ ended int }

func (*discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (d *discard) OnEnd(sdktrace.ReadOnlySpan)                   { d.ended++ }
func (*discard) Shutdown(context.Context) error                  { return nil }
func (*discard) ForceFlush(context.Context) error                { return nil }

// providers returns the SDK's providers: every span sampled (sampled
// false: none) and ended into p, metrics aggregated for a reader never
// collected.
func providers(t testing.TB, sampled bool, p sdktrace.SpanProcessor) (*sdktrace.TracerProvider, *sdkmetric.MeterProvider) {
	sampler := sdktrace.AlwaysSample()
	if !sampled {
		sampler = sdktrace.NeverSample()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(p))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return tp, mp
}

// receivedTen is a ReceiveMessage's ten messages, carrying no trace
// context (as the benchmark's do).
var receivedTen = make([]types.Message, 10)

// message is the telemetry of one message on the consumer's path, as
// pipeline.Instrument and the traced client feed it: received, its span
// started, its handler done, settled; and a tenth of a receive (its span
// and call) and of a delete batch's call.
func message(c *telemetry.Consumer, key any, attrs map[string]types.MessageAttributeValue, i int) {
	ctx := context.Background()
	c.Received(ctx)
	hctx := c.Start(ctx, key, testQueueURL, attrs, nil, "6f9c1d2e-msg", "6f9c1d2e-key", 1)
	_ = hctx
	c.HandlerDone(ctx, time.Millisecond)
	c.Settled(ctx, key, "ack", "", nil)
	if i%10 == 0 {
		c.Receive(ctx, testQueueURL, time.Time{}, receivedTen, nil)
		c.Call(ctx, "ReceiveMessage", time.Millisecond, nil, 10)
		c.Call(ctx, "DeleteMessageBatch", time.Millisecond, nil, -1)
	}
}

// TestMessageAllocations pins what the per-message telemetry allocates
// with the SDK's providers. With a sampler that drops every span: what
// the API and SDK's Start must allocate (the start options' copy of the
// attributes samplers see, the non-recording span that carries the trace
// context, the context that holds it), nothing of ours, nothing for the
// metrics. With every span sampled: those, the recorded span and its
// snapshot, and one call (two slices) for the per-message attributes.
// The code before these were pinned allocated 14 and 17.
func TestMessageAllocations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sampled bool
		max     float64
	}{
		{"sampled out", false, 3},
		{"sampled", true, 6 + raceAllocs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &discard{}
			tp, mp := providers(t, tc.sampled, p)
			c := telemetry.NewConsumer(tp, mp, testQueueURL)
			key := new(int)
			i := 0
			got := testing.AllocsPerRun(1000, func() {
				message(c, key, nil, i)
				i++
			})
			if got > tc.max {
				t.Errorf("%s: %.1f allocations per message, want at most %.0f", tc.name, got, tc.max)
			}
			if tc.sampled && p.ended == 0 {
				t.Error("no span ended")
			}
		})
	}
}

// TestSampledOutSpanGetsNothing: a span the sampler dropped is not
// kept for its settle (nothing is recorded on it), and a held message's
// earlier span still ends when it runs again.
func TestSampledOutSpanGetsNothing(t *testing.T) {
	p := &discard{}
	tp, mp := providers(t, false, p)
	c := telemetry.NewConsumer(tp, mp, testQueueURL)
	key := new(int)
	ctx := c.Start(context.Background(), key, testQueueURL, nil, nil, "id", "k", 1)
	if !traceSpanContextValid(ctx) {
		t.Fatal("the handler's context carries no span context")
	}
	c.Settled(context.Background(), key, "retry", "transient", errors.New("boom"))
	if p.ended != 0 {
		t.Errorf("%d spans ended, want 0", p.ended)
	}
}

// BenchmarkMessage is the telemetry of one message (see message): off
// (no providers), metrics only (the SDK's MeterProvider), sampled out (a sampler that drops every span, and the
// SDK's MeterProvider), and sampled (every span, ended into a batcher
// exporting nowhere).
func BenchmarkMessage(b *testing.B) {
	run := func(b *testing.B, c *telemetry.Consumer) {
		key := new(int)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			message(c, key, nil, i)
			i++
		}
	}
	b.Run("off", func(b *testing.B) { run(b, telemetry.NewConsumer(nil, nil, testQueueURL)) })
	b.Run("metrics-only", func(b *testing.B) {
		_, mp := providers(b, false, &discard{})
		run(b, telemetry.NewConsumer(nil, mp, testQueueURL))
	})
	b.Run("sampled-out", func(b *testing.B) {
		tp, mp := providers(b, false, &discard{})
		run(b, telemetry.NewConsumer(tp, mp, testQueueURL))
	})
	b.Run("sampled", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() {
			_ = tp.Shutdown(context.Background())
			_ = mp.Shutdown(context.Background())
		})
		run(b, telemetry.NewConsumer(tp, mp, testQueueURL))
	})
}

func traceSpanContextValid(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsValid()
}

// TestInFlight: sqsonce.messages.in_flight is the messages received and
// not yet settled, with the consumer's attributes.
func TestInFlight(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	c := telemetry.NewConsumer(nil, mp, testQueueURL)
	ctx := context.Background()
	for range 3 {
		c.Received(ctx)
	}
	c.Settled(ctx, new(int), "ack", "", nil)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sqsonce.messages.in_flight" {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || sum.IsMonotonic || len(sum.DataPoints) != 1 {
				t.Fatalf("in_flight is %#v, want one non-monotonic int64 point", m.Data)
			}
			p := sum.DataPoints[0]
			if dest, _ := p.Attributes.Value("messaging.destination.name"); p.Value != 2 || dest.AsString() != "orders" {
				t.Errorf("in_flight %d with %v, want 2 with messaging.destination.name=orders", p.Value, p.Attributes.ToSlice())
			}
			return
		}
	}
	t.Fatal("no sqsonce.messages.in_flight")
}

// TestAllocationsPerTenMessages pins what ten messages' telemetry
// allocates, a receive of ten among them, so that a tenth of a receive
// counts: with metrics only, nothing; with every span sampled out, the
// three allocations the SDK's Start makes per span (the start options'
// copy of the attributes, the non-recording span, the context) and the
// receive span's start time; sampled, those and the recorded spans' own.
// The receive span's options slice is reused (one allocation per receive
// fewer: 35 and 67 before).
func TestAllocationsPerTenMessages(t *testing.T) {
	for _, tc := range []struct {
		name            string
		traces, sampled bool
		max             float64
	}{
		{"metrics only", false, false, 0},
		{"sampled out", true, false, 34 + raceAllocs},
		{"sampled", true, true, 66 + 10*raceAllocs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, mp := providers(t, tc.sampled, &discard{})
			c := telemetry.NewConsumer(nil, mp, testQueueURL)
			if tc.traces {
				c = telemetry.NewConsumer(tp, mp, testQueueURL)
			}
			key := new(int)
			got := testing.AllocsPerRun(200, func() {
				for i := range 10 {
					message(c, key, nil, i)
				}
			})
			if got > tc.max {
				t.Errorf("%s: %.0f allocations per 10 messages, want at most %.0f", tc.name, got, tc.max)
			}
		})
	}
}

// TestManySpansInFlight: with many messages in flight (their spans kept
// in several shards), each message's settle ends its own span, with its
// own ID and outcome, and a message started again ends its earlier span.
func TestManySpansInFlight(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp, mp := providers(t, true, rec)
	c := telemetry.NewConsumer(tp, mp, testQueueURL)
	ctx := context.Background()
	keys := make([]*int, 200)
	for i := range keys {
		keys[i] = new(int)
		c.Start(ctx, keys[i], testQueueURL, nil, nil, fmt.Sprintf("m%d", i), "k", 1)
	}
	c.Start(ctx, keys[7], testQueueURL, nil, nil, "m7", "k", 2) // held, run again
	for i := len(keys) - 1; i >= 0; i-- {
		c.Settled(ctx, keys[i], "ack", "", nil)
	}
	got := map[string][]string{}
	for _, s := range rec.Ended() {
		var id, outcome string
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "messaging.message.id":
				id = kv.Value.AsString()
			case "sqsonce.outcome":
				outcome = kv.Value.AsString()
			}
		}
		got[id] = append(got[id], outcome)
	}
	for i := range keys {
		id, want := fmt.Sprintf("m%d", i), []string{"ack"}
		if i == 7 {
			want = []string{"held", "ack"}
		}
		if !slices.Equal(got[id], want) {
			t.Errorf("%s: spans ended with outcomes %v, want %v", id, got[id], want)
		}
	}
}
