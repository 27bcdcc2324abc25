package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/producer"
)

// outcomeCounter counts settled outcomes as the Observer sees them.
type outcomeCounter struct {
	consumer.NopObserver
	mu sync.Mutex
	n  map[string]int64
}

func (o *outcomeCounter) Settled(_ *consumer.Message, res consumer.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[res.Outcome.String()]++
}

func (o *outcomeCounter) total() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var t int64
	for _, v := range o.n {
		t += v
	}
	return t
}

// A mixed run on the local stack with both providers set: the metric of
// settled outcomes equals the outcomes the Observer saw, exactly; every
// handled message has a process span, and a message sent inside a trace
// is processed in that same trace.
func TestTelemetryOnTheLocalStack(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 5})
	ctx := context.Background()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()

	// The producer sends 3 messages inside a traced operation, 9 more
	// outside any trace, and one id twice.
	prod, err := producer.New(producer.Config{Client: client, QueueURL: queueURL})
	if err != nil {
		t.Fatal(err)
	}
	tracedCtx, parent := tp.Tracer("test").Start(ctx, "checkout")
	var traced []producer.Message
	for i := range 3 {
		traced = append(traced, producer.Message{ID: fmt.Sprintf("traced-%d", i), Body: "ack"})
	}
	for _, r := range prod.SendBatch(tracedCtx, traced) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	parent.End()
	var plain []producer.Message
	for i := range 3 {
		plain = append(plain,
			producer.Message{ID: fmt.Sprintf("perm-%d", i), Body: "perm"},
			producer.Message{ID: fmt.Sprintf("retry-%d", i), Body: "retry"},
			producer.Message{ID: fmt.Sprintf("ack-%d", i), Body: "ack"})
	}
	plain = append(plain, producer.Message{ID: "ack-0", Body: "ack"}) // a duplicate
	for _, r := range prod.SendBatch(ctx, plain) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}

	obs := &outcomeCounter{n: map[string]int64{}}
	var mu sync.Mutex
	retried := map[string]bool{}
	dd, err := dedupe.New(dedupe.Config{Store: dedupe.NewMemory(dedupe.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, Concurrency: 4,
		TracerProvider: tp, MeterProvider: mp, Observer: obs,
		Middleware: []consumer.Middleware{dd.Wrap},
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			switch m.Body {
			case "perm":
				return consumer.Permanent(errors.New("bad order"))
			case "retry":
				mu.Lock()
				defer mu.Unlock()
				if !retried[m.Key()] {
					retried[m.Key()] = true
					return consumer.RetryAfter(errors.New("busy"), time.Second)
				}
			}
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	// 13 messages: 3 traced acks, 3 acks, 1 duplicate, 3 dead letters, 3
	// retries that are acked on their second delivery: 16 settles.
	deadline := time.Now().Add(time.Minute)
	for obs.total() < 16 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var received int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				switch m.Name {
				case "sqsonce.messages.settled":
					o, _ := dp.Attributes.Value("sqsonce.outcome")
					got[o.AsString()] += dp.Value
				case "messaging.client.consumed.messages":
					received += dp.Value
				}
			}
		}
	}
	obs.mu.Lock()
	want := fmt.Sprint(obs.n)
	obs.mu.Unlock()
	if fmt.Sprint(got) != want || want != "map[ack:9 dead_letter:3 duplicate:1 retry:3]" {
		t.Fatalf("settled metric %v, observer %v; want both map[ack:9 dead_letter:3 duplicate:1 retry:3]", got, want)
	}
	if received != 16 {
		t.Fatalf("consumed messages metric %d, want 16 receives", received)
	}

	var process, inTrace int
	for _, s := range spans.Ended() {
		if !strings.HasPrefix(s.Name(), "process ") {
			continue
		}
		process++
		if s.SpanContext().TraceID() == parent.SpanContext().TraceID() {
			inTrace++
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Fatalf("span %s: parent %s, want the producer's span", s.Name(), s.Parent().SpanID())
			}
		}
		for _, a := range s.Attributes() {
			if a.Key == "messaging.system" && a.Value.AsString() != "aws_sqs" {
				t.Fatalf("messaging.system = %s", a.Value.AsString())
			}
		}
	}
	if process != 16 || inTrace != 3 {
		t.Fatalf("%d process spans (%d in the producer's trace), want 16 (3)", process, inTrace)
	}
}
