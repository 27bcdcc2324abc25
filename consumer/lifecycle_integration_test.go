package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestHeartbeatKeepsSlowHandlersInvisible: queue visibility 6s, handlers
// take 14s (over two visibility timeouts): each runs once and no message
// is received twice. The bounds leave a late heartbeat tick seconds of
// slack on a busy machine; the tight timing (2s visibility, 7s handlers)
// is tested on the fake's clock by
// TestHeartbeatKeepsSlowHandlersInvisibleOnFake.
func TestHeartbeatKeepsSlowHandlersInvisible(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 6})
	const n = 5
	sendN(t, client, queueURL, n, nil)
	var mu sync.Mutex
	runs := map[string]int{}
	counts := map[string]int{}
	var done atomic.Int64
	cc := &countingClient{SQSAPI: client}
	c, err := consumer.New(consumer.Config{
		Client: cc, QueueURL: queueURL, Concurrency: n,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			mu.Lock()
			runs[m.Body]++
			counts[m.Body] = max(counts[m.Body], m.ReceiveCount)
			mu.Unlock()
			select {
			case <-time.After(14 * time.Second):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			done.Add(1)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c)
	waitFor(t, 60*time.Second, "the slow handlers", func() bool { return done.Load() == n })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		b := fmt.Sprint(i)
		if runs[b] != 1 || counts[b] != 1 {
			t.Errorf("message %s: handler ran %d times, ApproximateReceiveCount %d; want 1 and 1", b, runs[b], counts[b])
		}
	}
	if cc.visBatches.Load() < 2 {
		t.Errorf("%d visibility extensions in 14s with a 6s visibility timeout", cc.visBatches.Load())
	}
	// Every message was deleted after its one run: none can come back.
	if visible, inFlight := testenv.Count(t, client, queueURL); visible+inFlight != 0 {
		t.Errorf("queue still holds %d visible + %d in flight", visible, inFlight)
	}
}

// TestShutdownDrains: 50 handlers running and 20 messages received but not
// started when Run's context is cancelled. The 20 are released at once; of
// the 50, those that finish are deleted and those still running at
// ShutdownTimeout are cancelled (cause ErrShutdown) and released.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	const running, waiting = 50, 20
	sendN(t, client, queueURL, running+waiting, nil)

	finish := make(chan struct{})
	var started, finished, cancelled atomic.Int64
	var badCause atomic.Value
	obs := &recordingObserver{}
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, Observer: obs,
		Concurrency: running, Prefetch: waiting,
		ShutdownTimeout: 6 * time.Second,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			started.Add(1)
			var i int
			fmt.Sscan(m.Body, &i)
			if i%2 == 0 {
				<-finish // even bodies finish once shutdown starts
				finished.Add(1)
				return nil
			}
			<-ctx.Done() // odd bodies run until cancelled
			if !errors.Is(context.Cause(ctx), consumer.ErrShutdown) {
				badCause.Store(fmt.Sprint(context.Cause(ctx)))
			}
			cancelled.Add(1)
			return ctx.Err()
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	waitFor(t, 30*time.Second, "50 running and 20 waiting", func() bool {
		return started.Load() == running && obs.receivedCount() == running+waiting
	})
	cancel()
	close(finish)
	// The 20 waiting messages are visible again while the drain still
	// waits for the running handlers (ShutdownTimeout is 6s).
	waitFor(t, 5*time.Second, "the waiting messages to be released", func() bool {
		visible, _ := testenv.Count(t, client, queueURL)
		return visible >= waiting
	})
	select {
	case err := <-errc:
		t.Fatalf("Run returned (%v) before the released messages were seen", err)
	default:
	}
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run = %v, want an error wrapping context.DeadlineExceeded (handlers were cancelled)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	if v := badCause.Load(); v != nil {
		t.Errorf("handler context cancelled with cause %v, want ErrShutdown", v)
	}
	if started.Load() != running {
		t.Errorf("%d handlers started, want %d (the waiting messages must not run)", started.Load(), running)
	}
	fin, canc := int(finished.Load()), int(cancelled.Load())
	if fin+canc != running || fin == 0 || canc == 0 {
		t.Errorf("%d finished, %d cancelled; want both, %d in all", fin, canc, running)
	}
	if got := obs.count(consumer.OutcomeAck); got != fin {
		t.Errorf("%d acked, want %d", got, fin)
	}
	if got := obs.count(consumer.OutcomeRelease); got != waiting+canc {
		t.Errorf("%d released, want %d", got, waiting+canc)
	}
	// Every settle was flushed before Run returned: finished messages are
	// gone, the rest are visible now (not waiting out a visibility timeout).
	visible, inFlight := testenv.Count(t, client, queueURL)
	if visible != waiting+canc || inFlight != 0 {
		t.Errorf("after Run: %d visible, %d in flight; want %d visible, 0 in flight", visible, inFlight, waiting+canc)
	}
}

// TestBadConfigFailsBeforeReceiving: each bad configuration fails Run (or
// New) with an error that says what to fix, before any ReceiveMessage.
func TestBadConfigFailsBeforeReceiving(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	prefix := testenv.Prefix(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, prefix, testenv.QueueOptions{VisibilityTimeout: 30})
	noDLQ, _ := testenv.Queue(t, client, prefix+"-nodlq", testenv.QueueOptions{})
	fifoDLQ, _ := testenv.Queue(t, client, prefix+"-fifodlq", testenv.QueueOptions{FIFO: true})
	shortVis, _ := testenv.QueueWithDLQ(t, client, prefix+"-short", testenv.QueueOptions{VisibilityTimeout: 2})
	missing := strings.Replace(queueURL, prefix, prefix+"-missing", 1)
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })

	for _, tc := range []struct {
		name string
		cfg  consumer.Config
		want string
	}{
		{"queue missing", consumer.Config{QueueURL: missing}, "does not exist"},
		{"queue name missing", consumer.Config{QueueName: "no-such-queue-" + prefix}, "does not exist"},
		{"no DLQ", consumer.Config{QueueURL: noDLQ}, "no dead-letter queue"},
		{"DLQ missing", consumer.Config{QueueURL: noDLQ, DeadLetterQueueURL: missing}, "dead-letter queue"},
		{"DLQ of the other kind", consumer.Config{QueueURL: noDLQ, DeadLetterQueueURL: fifoDLQ}, "standard but its dead-letter queue"},
		{"visibility not above heartbeat", consumer.Config{QueueURL: shortVis, HeartbeatInterval: 2 * time.Second}, "must be longer than the heartbeat interval"},
		{"configured visibility not above heartbeat", consumer.Config{QueueURL: queueURL, VisibilityTimeout: 5 * time.Second, HeartbeatInterval: 5 * time.Second}, "must be longer than HeartbeatInterval"},
		{"negative concurrency", consumer.Config{QueueURL: queueURL, Concurrency: -1}, "must not be negative"},
		{"wait time too long", consumer.Config{QueueURL: queueURL, WaitTime: time.Minute}, "WaitTime"},
		{"backoff cap below base", consumer.Config{QueueURL: queueURL, Backoff: consumer.Backoff{Base: time.Minute, Cap: time.Second}}, "Cap ≥ Base"},
		{"no handler", consumer.Config{QueueURL: queueURL}, "Handler is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &countingClient{SQSAPI: client}
			cfg := tc.cfg
			cfg.Client = cc
			if tc.name != "no handler" {
				cfg.Handler = h
			}
			c, err := consumer.New(cfg)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err = c.Run(ctx)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if n := cc.receives.Load(); n != 0 {
				t.Errorf("%d ReceiveMessage calls before the error", n)
			}
			t.Logf("%v", err)
		})
	}
}
