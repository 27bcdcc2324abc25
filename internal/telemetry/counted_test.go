package telemetry_test

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// countingProvider wraps a MeterProvider and counts the Adds on its
// synchronous counters.
type countingProvider struct {
	metric.MeterProvider
	adds *atomic.Int64
}

func (p countingProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return countingMeter{Meter: p.MeterProvider.Meter(name, opts...), adds: p.adds}
}

type countingMeter struct {
	metric.Meter
	adds *atomic.Int64
}

func (m countingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c, err := m.Meter.Int64Counter(name, opts...)
	return countingCounter{Int64Counter: c, adds: m.adds}, err
}

type countingCounter struct {
	metric.Int64Counter
	adds *atomic.Int64
}

func (c countingCounter) Add(ctx context.Context, v int64, opts ...metric.AddOption) {
	c.adds.Add(1)
	c.Int64Counter.Add(ctx, v, opts...)
}

// TestPerMessageCountsNoSyncCounter: a message's path (received, span,
// handler done, settled, its share of a receive and a delete batch)
// makes no synchronous counter Add: the counters bumped per message or
// call are counted in atomics and observed at collection.
func TestPerMessageCountsNoSyncCounter(t *testing.T) {
	adds := &atomic.Int64{}
	tp, mp := providers(t, true, &discard{})
	c := telemetry.NewConsumer(tp, countingProvider{MeterProvider: mp, adds: adds}, testQueueURL)
	key := new(int)
	for i := range 20 {
		message(c, key, nil, i)
	}
	if n := adds.Load(); n != 0 {
		t.Errorf("20 messages made %d synchronous counter Adds, want 0", n)
	}
}

// TestCountedMetrics: the counters kept in atomics read as cumulative
// sums, per attribute set, through a reader, and are no longer reported
// once the Consumer is closed.
func TestCountedMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	c := telemetry.NewConsumer(nil, mp, testQueueURL)
	ctx := context.Background()
	collect := func() map[string]int64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				sum, ok := m.Data.(metricdata.Sum[int64])
				if !ok {
					continue
				}
				if m.Name != "sqsonce.messages.in_flight" && (!sum.IsMonotonic || sum.Temporality != metricdata.CumulativeTemporality) {
					t.Errorf("%s is not a cumulative monotonic sum", m.Name)
				}
				for _, dp := range sum.DataPoints {
					v, _ := dp.Attributes.Value(attribute.Key("sqsonce.outcome"))
					got[m.Name+"/"+v.AsString()] += dp.Value
				}
			}
		}
		return got
	}
	for range 3 {
		c.Received(ctx)
	}
	c.Settled(ctx, new(int), "ack", "", nil)
	c.Settled(ctx, new(int), "ack", "", nil)
	c.Settled(ctx, new(int), "retry", "transient", nil)
	c.Call(ctx, "DeleteMessageBatch", 0, nil, -1)
	want := map[string]int64{
		"messaging.client.consumed.messages/": 3,
		"sqsonce.messages.settled/ack":        2,
		"sqsonce.messages.settled/retry":      1,
		"sqsonce.sqs.calls/":                  1,
		"sqsonce.messages.in_flight/":         0,
	}
	got := collect()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], w, got)
		}
	}
	c.Received(ctx)
	if got := collect()["messaging.client.consumed.messages/"]; got != 4 {
		t.Errorf("consumed after one more = %d, want 4 (cumulative)", got)
	}
	// A second Consumer of the same queue (a second Run) adds to the same
	// series, as a synchronous counter's Adds would.
	c2 := telemetry.NewConsumer(nil, mp, testQueueURL)
	c2.Received(ctx)
	if got := collect()["messaging.client.consumed.messages/"]; got != 5 {
		t.Errorf("consumed with a second Consumer = %d, want 5", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := collect(); got["messaging.client.consumed.messages/"] != 1 || got["sqsonce.messages.settled/ack"] != 0 {
		t.Errorf("after the first Consumer's Close: %v, want its counts gone", got)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := collect(); len(got) != 0 {
		t.Errorf("after Close: %v reported, want none", got)
	}
}
