package consumer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestBacklogGaugeOnTheLocalStack: 10 messages sent and 2 sent with a
// delay; a consumer of 3 handlers, which block, holds 3 of them. The
// backlog gauge reads what the queue itself answers: 7 visible, 3 in
// flight, 2 delayed.
func TestBacklogGaugeOnTheLocalStack(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	ctx := context.Background()
	for i := range 10 {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String(fmt.Sprint("later-", i)), DelaySeconds: 900}); err != nil {
			t.Fatal(err)
		}
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(ctx) }()
	started := make(chan struct{}, 10)
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, Concurrency: 3, Prefetch: consumer.NoPrefetch,
		MeterProvider: mp, BacklogInterval: time.Second,
		Handler: consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Message) error {
			started <- struct{}{}
			<-ctx.Done() // blocked until the drain gives up on it
			return context.Cause(ctx)
		}),
		ShutdownTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	defer func() {
		cancel()
		<-done // the blocked handlers are cancelled and their messages released
	}()
	for range 3 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("3 handlers did not start")
		}
	}

	want := "map[delayed:2 in_flight:3 visible:7]"
	var got, queue string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		l := readLoad(t, reader)
		visible, inFlight := testenv.Count(t, client, queueURL)
		got, queue = fmt.Sprint(l.backlog), fmt.Sprint(map[string]int{"visible": visible, "in_flight": inFlight})
		if got == want {
			break
		}
	}
	if got != want {
		t.Fatalf("backlog gauge %s, want %s (the queue answers %s)", got, want, queue)
	}
	if queue != "map[in_flight:3 visible:7]" {
		t.Fatalf("the queue answers %s, want 7 visible and 3 in flight", queue)
	}
}
