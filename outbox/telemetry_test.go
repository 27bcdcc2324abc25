package outbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqsonce/sqsonce/outbox"
)

// fakeSQS accepts every entry except those whose body contains "bad".
type fakeSQS struct {
	mu   sync.Mutex
	sent []types.SendMessageBatchRequestEntry
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if strings.Contains(aws.ToString(e.MessageBody), "bad") {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
			continue
		}
		f.sent = append(f.sent, e)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id})
	}
	return out, nil
}

// GetQueueAttributes answers SQS's default MaximumMessageSize.
func (f *fakeSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "1048576"}}, nil
}

// A relay with a MeterProvider: three events published, an entity whose
// sends always fail parked after two attempts with its second event held
// back; the counters say so exactly, and the gauges show what waits.
func TestRelayMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()

		store := outbox.NewMemory(outbox.MemoryConfig{})
		start := time.Now()
		if err := store.Put(ctx,
			outbox.Event{ID: "a1", Entity: "a", Payload: "ok"},
			outbox.Event{ID: "a2", Entity: "a", Payload: "ok"},
			outbox.Event{ID: "b1", Entity: "b", Payload: "ok"},
			outbox.Event{ID: "x1", Entity: "x", Payload: "bad"},
			outbox.Event{ID: "x2", Entity: "x", Payload: "bad too"},
		); err != nil {
			t.Fatal(err)
		}
		client := &fakeSQS{}
		r, err := outbox.NewRelay(outbox.RelayConfig{
			Store: store, Client: client, QueueURL: "https://sqs.us-east-1.amazonaws.com/1/q",
			MaxAttempts: 2, BackoffBase: time.Second, BackoffMax: time.Second,
			StatsInterval: 10 * time.Second, MeterProvider: mp,
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(35 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		ints := map[string]int64{}
		var age float64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, dp := range d.DataPoints {
						ints[m.Name] += dp.Value
					}
				case metricdata.Gauge[int64]:
					ints[m.Name] = d.DataPoints[0].Value
				case metricdata.Gauge[float64]:
					age = d.DataPoints[0].Value
				}
			}
		}
		want := map[string]int64{
			"sqsonce.outbox.published":     3,
			"sqsonce.outbox.send_failures": 2,
			"sqsonce.outbox.dead":          1,
			"sqsonce.outbox.pending":       1, // x2, behind the parked x1
			"sqsonce.outbox.dead_events":   1,
		}
		for name, n := range want {
			if ints[name] != n {
				t.Fatalf("metrics %v, want %v", ints, want)
			}
		}
		// Stats are read every 10 s: the last time 30 s after the write.
		if wantAge := time.Since(start).Truncate(10 * time.Second).Seconds(); age != wantAge {
			t.Fatalf("oldest pending age %vs, want %vs", age, wantAge)
		}
		if len(client.sent) != 3 {
			t.Fatalf("sent %d messages, want 3", len(client.sent))
		}
	})
}

// An event's trace context travels as message attributes; an event
// without one gets none (not the relay's own).
func TestRelaySendsTheEventsTraceContext(t *testing.T) {
	ctx := context.Background()
	store := outbox.NewMemory(outbox.MemoryConfig{})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if err := store.Put(ctx,
		outbox.Event{ID: "t", Entity: "a", Type: "credit", Payload: "ok", Trace: map[string]string{"traceparent": parent}},
		outbox.Event{ID: "p", Entity: "b", Payload: "ok"},
	); err != nil {
		t.Fatal(err)
	}
	client := &fakeSQS{}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: client, QueueURL: "https://sqs.us-east-1.amazonaws.com/1/q"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Step(ctx); n != 2 || err != nil {
		t.Fatalf("Step: %d, %v", n, err)
	}
	got := map[string]map[string]types.MessageAttributeValue{}
	for _, e := range client.sent {
		got[aws.ToString(e.MessageAttributes["sqsonce-id"].StringValue)] = e.MessageAttributes
	}
	if tp := aws.ToString(got["t"]["traceparent"].StringValue); tp != parent {
		t.Fatalf("traced event sent with traceparent %q, want %q (attributes %v)", tp, parent, got["t"])
	}
	if typ := aws.ToString(got["t"][outbox.AttrType].StringValue); typ != "credit" {
		t.Fatalf("event type %q", typ)
	}
	if _, ok := got["p"]["traceparent"]; ok {
		t.Fatal("an event without a trace context was sent with one")
	}
}
