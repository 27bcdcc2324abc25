package dedupe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
)

// brokenStore fails every claim of the key "broken".
type brokenStore struct{ dedupe.Store }

func (s brokenStore) Claim(ctx context.Context, key, fp string, lease time.Duration) (dedupe.Claim, error) {
	if key == "broken" {
		return dedupe.Claim{}, errors.New("store down")
	}
	return s.Store.Claim(ctx, key, fp, lease)
}

// A mixed run with a MeterProvider: sqsonce.dedupe.results counts each
// claim's result exactly, and a traced message's span carries its result.
func TestResultsMetric(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) }()

	store := brokenStore{dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "metrics"})}
	var h consumer.Handler
	var inner error
	h = consumer.Chain(consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		if msg.Key() == "busy" {
			// Another delivery of the same key while this one runs.
			inner = h.Handle(ctx, message("m-busy-2", "busy", "x"))
		}
		return nil
	}), wrap(t, store, dedupe.Config{MeterProvider: mp}))

	handle := func(msg *consumer.Message) error {
		sctx, span := tp.Tracer("test").Start(ctx, "process "+msg.ID)
		defer span.End()
		return h.Handle(sctx, msg)
	}
	for _, msg := range []*consumer.Message{
		message("m1", "k1", "a"), // claimed
		message("m2", "k1", "a"), // duplicate
		message("m3", "k1", "b"), // key_reused
		message("m4", "k2", "a"), // claimed
		message("m5", "busy", "x"),
		message("m6", "broken", "a"), // error
	} {
		_ = handle(msg)
	}
	var inProgress *dedupe.InProgressError
	if !errors.As(inner, &inProgress) {
		t.Fatalf("the delivery repeated while running: %v, want in progress", inner)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sqsonce.dedupe.results" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value("result")
				got[v.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{"claimed": 3, "duplicate": 1, "key_reused": 1, "in_progress": 1, "error": 1}
	if len(got) != len(want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	for r, n := range want {
		if got[r] != n {
			t.Fatalf("results %v, want %v", got, want)
		}
	}

	byName := map[string]string{}
	for _, s := range spans.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == "sqsonce.dedupe.result" {
				byName[s.Name()] = a.Value.AsString()
			}
		}
	}
	for name, r := range map[string]string{"process m1": "claimed", "process m2": "duplicate", "process m3": "key_reused", "process m6": "error"} {
		if byName[name] != r {
			t.Fatalf("span %q has dedupe result %q, want %q (all: %v)", name, byName[name], r, byName)
		}
	}
}
