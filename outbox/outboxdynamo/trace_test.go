package outboxdynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap/zaptest"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
)

// An event written inside a traced request keeps the writer's trace
// context in DynamoDB; the relay sends it with the message, and the
// consumer's process span on the local stack joins the writer's trace.
func TestTraceRunsFromWriterToConsumer(t *testing.T) {
	st, _ := newTable(t)
	sqsClient := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, sqsClient, testenv.Prefix(t), testenv.QueueOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	reqCtx, req := tp.Tracer("test").Start(ctx, "POST /credits")
	traced := outbox.WithTraceContext(reqCtx, outbox.Event{ID: "traced", Entity: "acct-1", Type: "credit", Payload: `{"n":1}`})
	req.End()
	plain := outbox.WithTraceContext(ctx, outbox.Event{ID: "plain", Entity: "acct-2", Payload: `{"n":2}`})
	if plain.Trace != nil {
		t.Fatalf("an event written outside a trace carries %v", plain.Trace)
	}
	if err := st.Commit(ctx, func() ([]types.TransactWriteItem, error) { return st.Put(traced, plain) }); err != nil {
		t.Fatal(err)
	}

	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: sqsClient, QueueURL: queueURL, PollInterval: 20 * time.Millisecond, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The relay's own context is traced too: the message must carry the
	// writer's trace, not this one.
	relayCtx, relaySpan := tp.Tracer("test").Start(ctx, "relay")
	defer relaySpan.End()
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()

	handled := make(chan string, 2)
	c, err := consumer.New(consumer.Config{
		Client: sqsClient, QueueURL: queueURL, TracerProvider: tp, Logger: zaptest.NewLogger(t),
		Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
			handled <- m.ID
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	consumerDone := make(chan error, 1)
	go func() { consumerDone <- c.Run(ctx) }()
	for range 2 {
		select {
		case <-handled:
		case err := <-consumerDone:
			t.Fatalf("the consumer stopped: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the relayed events were not consumed within 30s")
		}
	}
	cancel()
	if err := <-consumerDone; err != nil {
		t.Fatal(err)
	}
	if err := <-relayDone; err != nil {
		t.Fatal(err)
	}

	want := req.SpanContext()
	byKey := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == "sqsonce.key" {
				byKey[a.Value.AsString()] = s
			}
		}
	}
	if len(byKey) != 2 {
		t.Fatalf("process spans for %d messages, want 2", len(byKey))
	}
	if s := byKey["traced"]; s == nil || s.SpanContext().TraceID() != want.TraceID() || s.Parent().SpanID() != want.SpanID() {
		t.Fatalf("the traced event's process span is not a child of the request span %s/%s (span found: %t)", want.TraceID(), want.SpanID(), s != nil)
	}
	if s := byKey["plain"]; s == nil || s.Parent().IsValid() {
		t.Fatalf("the untraced event's process span has parent %v, want a new trace (not the relay's)", s.Parent())
	}
}
