package consumer_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqsonce/sqsonce/consumer"
)

// countingReceives counts the ReceiveMessage calls that returned no
// message.
type countingReceives struct {
	consumer.SQSAPI
	empty atomic.Int64
}

func (c *countingReceives) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, o...)
	if err == nil && len(out.Messages) == 0 {
		c.empty.Add(1)
	}
	return out, err
}

// Thirty messages, then a minute of empty long polls: the consumer makes
// one process span per message and one receive span per ReceiveMessage
// that returned messages, each with its batch's size; an empty poll makes
// no span (it carries no message to link to, and an idle consumer would
// otherwise export a span per poll). Spans per message are counted with
// an in-memory exporter.
func TestSpansPerMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		ctx := context.Background()
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer func() { _ = tp.Shutdown(ctx) }()
		const n = 30
		for i := 0; i < n; i += 10 {
			var entries []types.SendMessageBatchRequestEntry
			for j := i; j < i+10; j++ {
				entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(strconv.Itoa(j))})
			}
			if out, err := f.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q), Entries: entries}); err != nil || len(out.Failed) > 0 {
				t.Fatalf("send: %v %+v", err, out)
			}
		}
		client := &countingReceives{SQSAPI: f}
		var handled atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Client: client, Concurrency: 4, TracerProvider: tp, WaitTime: 5 * time.Second,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				handled.Add(1)
				return nil
			}),
		})
		if !waitUntil(time.Minute, func() bool { return handled.Load() == n }) {
			t.Fatalf("%d handled, want %d", handled.Load(), n)
		}
		time.Sleep(time.Minute) // empty long polls
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if client.empty.Load() == 0 {
			t.Fatal("no empty receive: the test does not test it")
		}
		var process, receive, empty, received int64
		for _, s := range exp.GetSpans() {
			switch s.Name {
			case "process orders":
				process++
			case "receive orders":
				receive++
				count := int64(0)
				for _, kv := range s.Attributes {
					if kv.Key == "messaging.batch.message_count" {
						count = kv.Value.AsInt64()
					}
				}
				if count == 0 {
					empty++
				}
				received += count
			default:
				t.Errorf("unexpected span %q", s.Name)
			}
		}
		if process != n || received != n || empty != 0 {
			t.Fatalf("%d process spans and %d receive spans (%d of them empty, %d messages) for %d messages and %d empty receives: want %d process spans and receive spans only for the receives that brought the %d messages",
				process, receive, empty, received, n, client.empty.Load(), n, n)
		}
	})
}

// liveCallbacks is a MeterProvider that counts the collection callbacks
// registered and not unregistered.
type liveCallbacks struct {
	metric.MeterProvider
	live atomic.Int64
}

func (p *liveCallbacks) Meter(name string, o ...metric.MeterOption) metric.Meter {
	return &liveMeter{Meter: p.MeterProvider.Meter(name, o...), p: p}
}

type liveMeter struct {
	metric.Meter
	p *liveCallbacks
}

func (m *liveMeter) RegisterCallback(f metric.Callback, insts ...metric.Observable) (metric.Registration, error) {
	r, err := m.Meter.RegisterCallback(f, insts...)
	if err == nil {
		m.p.live.Add(1)
		r = &liveRegistration{Registration: r, p: m.p}
	}
	return r, err
}

type liveRegistration struct {
	metric.Registration
	p *liveCallbacks
}

func (r *liveRegistration) Unregister() error {
	r.p.live.Add(-1)
	return r.Registration.Unregister()
}

// One Consumer run three times on a queue, a message each time: its
// metrics count on across the Runs and stay observable after Run returns
// (a MeterProvider's last collection at shutdown reads them), with one
// collection callback registered, where each Run left one behind.
func TestRunsShareMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = sdk.Shutdown(ctx) }()
		mp := &liveCallbacks{MeterProvider: sdk}
		var handled atomic.Int64
		c, err := consumer.New(consumer.Config{
			Client: f, QueueURL: q, Concurrency: 1, MeterProvider: mp,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				handled.Add(1)
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		consumed := func() (points int, sum int64) {
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(ctx, &rm); err != nil {
				t.Fatal(err)
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "messaging.client.consumed.messages" {
						for _, p := range s.DataPoints {
							points++
							sum += p.Value
						}
					}
				}
			}
			return points, sum
		}
		for run := int64(1); run <= 3; run++ {
			if _, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("a")}); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() { errc <- c.Run(rctx) }()
			if !waitUntil(time.Minute, func() bool { return handled.Load() == run }) {
				t.Fatalf("run %d: %d handled, want %d", run, handled.Load(), run)
			}
			cancel()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if points, sum := consumed(); points != 1 || sum != run {
				t.Fatalf("after run %d returned: messaging.client.consumed.messages has %d points summing to %d, want 1 point of %d", run, points, sum, run)
			}
			if n := mp.live.Load(); n != 1 {
				t.Fatalf("after run %d: %d collection callbacks registered, want 1", run, n)
			}
		}
	})
}
