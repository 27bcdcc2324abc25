package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// TestLostLeaseLeftAlone (issue 42, defect 5): a handler cancelled because
// its message's visibility was lost (another consumer received it) fails
// on its MaxAttempts-th receive, or transiently before it. The consumer
// leaves the message alone, as it leaves a lost message it never ran: no
// dead letter while another consumer holds it, no delete and no
// visibility change with the old handle.
func TestLostLeaseLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxAttempts int
	}{
		{"max attempts reached", 1},
		{"transient failure", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "3"}, nil)
				f.Put(q, "slow", "")
				var stale atomic.Value // the handle the consumer holds, once stolen
				var mu sync.Mutex
				var settles []string // settle calls made with the stale handle
				f.Inject(func(op string, in any) sqsfake.Fault {
					h, _ := stale.Load().(string)
					if h == "" {
						return sqsfake.Fault{}
					}
					mu.Lock()
					defer mu.Unlock()
					switch in := in.(type) {
					case *sqs.DeleteMessageInput:
						if aws.ToString(in.ReceiptHandle) == h {
							settles = append(settles, op)
						}
					case *sqs.DeleteMessageBatchInput:
						for _, e := range in.Entries {
							if aws.ToString(e.ReceiptHandle) == h {
								settles = append(settles, op)
							}
						}
					case *sqs.ChangeMessageVisibilityInput:
						if aws.ToString(in.ReceiptHandle) == h {
							settles = append(settles, fmt.Sprintf("%s(%d)", op, in.VisibilityTimeout))
						}
					case *sqs.ChangeMessageVisibilityBatchInput:
						for _, e := range in.Entries {
							// The heartbeat's extensions ask for the
							// visibility timeout (3s); a settle for the
							// backoff (1h).
							if aws.ToString(e.ReceiptHandle) == h && e.VisibilityTimeout != 3 {
								settles = append(settles, fmt.Sprintf("%s(%d)", op, e.VisibilityTimeout))
							}
						}
					}
					return sqsfake.Fault{}
				})
				obs := &recordingObserver{}
				var handled atomic.Int64
				stop := startOnFake(t, f, q, consumer.Config{
					// The running handler holds the only slot: the consumer
					// does not receive while it runs, so the thief gets the
					// message.
					Concurrency: 1, Prefetch: consumer.NoPrefetch,
					MaxAttempts: tc.maxAttempts,
					Backoff:     consumer.Backoff{Base: time.Hour, RandFunc: ceiling},
					Observer:    obs,
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						steal(t, f, q, aws.ToString(m.Raw.ReceiptHandle))
						stale.Store(aws.ToString(m.Raw.ReceiptHandle))
						<-ctx.Done()
						handled.Add(1)
						return fmt.Errorf("charge: %w", context.Cause(ctx))
					}),
				})
				if !waitUntil(time.Hour, func() bool { return settledTotal(obs) > 0 }) {
					t.Fatal("the message was not settled within an hour")
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if n := handled.Load(); n != 1 {
					t.Fatalf("handler returned %d times, want 1", n)
				}
				if sent := f.Sent(dlq); len(sent) != 0 {
					t.Errorf("%d dead letter(s) sent while another consumer holds the message", len(sent))
				}
				mu.Lock()
				if len(settles) != 0 {
					t.Errorf("settle calls with the lost handle: %v, want none", settles)
				}
				mu.Unlock()
				if ms := f.Messages(q); len(ms) != 1 || ms[0].State != sqsfake.InFlight {
					t.Errorf("queue holds %+v, want the message, in flight with the other consumer", ms)
				}
				if n := obs.count(consumer.OutcomeRelease); n != 1 {
					t.Errorf("outcomes %v, want one release", obs.outcomes)
				}
			})
		})
	}
}

// stallingObserver holds each lost callback that comes after the running
// message's until the rest of the bubble is idle: the heartbeat reports
// the handles one round found lost one at a time, and a waiting message
// must not start in between. The running message's callback first tells
// its handler to return.
type stallingObserver struct {
	recordingObserver
	running string        // body of the message whose handler runs
	wake    chan struct{} // closed at the running message's lost callback

	smu      sync.Mutex
	seenLost bool
}

func (o *stallingObserver) LeaseLost(msg *consumer.Message, err error) {
	o.recordingObserver.LeaseLost(msg, err)
	o.smu.Lock()
	stall := o.seenLost
	if msg.Body == o.running {
		o.seenLost = true
		close(o.wake)
	}
	o.smu.Unlock()
	if stall || msg.Body == o.running {
		synctest.Wait()
	}
}

// TestLostTogetherWaitingNotStarted (issue 42, defect 5): one heartbeat
// round finds both the running message and the one waiting for its worker
// lost. The running handler returns at its own loss, before the waiting
// message's lost callback has run; the worker must not start the waiting
// message, whose handle the heartbeat no longer tracks.
func TestLostTogetherWaitingNotStarted(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "3"}, nil)
				f.Put(q, "first", "")
				f.Put(q, "second", "")
				obs := &stallingObserver{running: "first", wake: make(chan struct{})}
				var mu sync.Mutex
				var ran []string
				stop := startOnFake(t, f, q, consumer.Config{
					Concurrency: 1, Prefetch: 1, Receivers: 1, Observer: obs,
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						mu.Lock()
						ran = append(ran, m.Body)
						mu.Unlock()
						if m.Body != "first" {
							return nil
						}
						// Another consumer takes both messages (both slots
						// are held: this consumer does not receive
						// meanwhile), so one extension round loses both.
						for _, fm := range f.Messages(q) {
							steal(t, f, q, fm.ReceiptHandle)
						}
						<-obs.wake
						return errors.New("gave up")
					}),
				})
				if !waitUntil(time.Hour, func() bool { return obs.lostCount() == 2 && settledTotal(&obs.recordingObserver) == 2 }) {
					t.Fatalf("after an hour: %d lost, %d settled; want 2 and 2", obs.lostCount(), settledTotal(&obs.recordingObserver))
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(ran) != 1 {
					t.Errorf("handlers ran for %v, want only first: second lost its visibility before it started", ran)
				}
			})
		})
	}
}

// settledTotal is how many messages o saw settled, whatever the outcome.
func settledTotal(o *recordingObserver) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.outcomes {
		n += c
	}
	return n
}
