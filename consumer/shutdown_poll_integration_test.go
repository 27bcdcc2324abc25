package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// pollCounter counts the ReceiveMessage calls in flight.
type pollCounter struct {
	*sqs.Client
	polling atomic.Int64
}

func (p *pollCounter) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	p.polling.Add(1)
	defer p.polling.Add(-1)
	return p.Client.ReceiveMessage(ctx, in, optFns...)
}

// TestShutdownLeavesNothingInFlight: on a real server, a drain that
// releases prefetched messages while its receivers long-poll an empty
// queue leaves none of them in flight once Run returns. (A long poll the
// client cut off goes on on the server and would take a released message
// into a response nobody reads, invisible for the visibility timeout.)
func TestShutdownLeavesNothingInFlight(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	const n, running = 5, 2
	sendN(t, client, queueURL, n, nil)
	pc := &pollCounter{Client: client}
	obs := &recordingObserver{}
	var started atomic.Int64
	c, err := consumer.New(consumer.Config{
		Client: pc, QueueURL: queueURL, Observer: obs,
		Concurrency: running, Prefetch: 20, Receivers: 2, WaitTime: 4 * time.Second,
		// The running handlers outlast the receive calls' second of grace:
		// the waiting messages are released after the calls were cut.
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			started.Add(1)
			time.Sleep(3 * time.Second)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	waitFor(t, 30*time.Second, "2 running, 3 waiting and a long poll in flight", func() bool {
		return started.Load() == running && obs.receivedCount() == n && pc.polling.Load() > 0
	})
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	visible, inFlight := testenv.Count(t, client, queueURL)
	if visible != n-running || inFlight != 0 {
		t.Errorf("after Run: %d visible, %d in flight; want %d visible (released), 0 in flight", visible, inFlight, n-running)
	}
}
