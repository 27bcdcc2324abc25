package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// onFake makes a queue and its dead-letter queue on a new sqsfake.Fake:
// FIFO when fifo is set, with the given attributes (a RedrivePolicy with
// maxReceiveCount 100 unless attrs has one).
func onFake(fifo bool, attrs, dlqAttrs map[string]string) (f *sqsfake.Fake, queueURL, dlqURL string) {
	f = sqsfake.New()
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	dlqURL = f.AddQueue("orders-dlq"+suffix, dlqAttrs)
	a := map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq` + suffix + `","maxReceiveCount":"100"}`,
	}
	for k, v := range attrs {
		a[k] = v
	}
	return f, f.AddQueue("orders"+suffix, a), dlqURL
}

// startOnFake runs a consumer on queueURL of f inside the current synctest
// bubble and returns a stop function.
func startOnFake(t *testing.T, f *sqsfake.Fake, queueURL string, cfg consumer.Config) (stop func() error) {
	t.Helper()
	if cfg.Client == nil { // else a wrapper of f
		cfg.Client = f
	}
	cfg.QueueURL = queueURL
	c, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	return func() error {
		cancel()
		return <-errc
	}
}

// waitUntil sleeps (in the bubble's time) until cond holds or limit has
// passed, and reports whether it holds.
func waitUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

func checkProblems(t *testing.T, f *sqsfake.Fake) {
	t.Helper()
	for _, p := range f.Problems() {
		t.Errorf("SQS contract violation: %s", p)
	}
}

// runCounter counts handler runs by body, and the highest receive count
// seen.
type runCounter struct {
	mu     sync.Mutex
	runs   map[string]int
	counts map[string]int
	at     map[string][]time.Time
	order  []string
}

func (c *runCounter) add(m *consumer.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs, c.counts, c.at = map[string]int{}, map[string]int{}, map[string][]time.Time{}
	}
	c.runs[m.Body]++
	c.counts[m.Body] = max(c.counts[m.Body], m.ReceiveCount)
	c.at[m.Body] = append(c.at[m.Body], time.Now())
	c.order = append(c.order, m.Body)
}

func (c *runCounter) get(body string) (runs, receiveCount int, at []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[body], c.counts[body], append([]time.Time(nil), c.at[body]...)
}

// TestSettleRetriesOutliveALostDelete (issue 10, defect 2): every
// DeleteMessageBatch is slow (the call times out, nothing applied) or
// applied with its response lost. The per-entry retries get their own
// timeouts and go through: each message is handled once, the dead letter
// is sent once, the queue ends empty.
func TestSettleRetriesOutliveALostDelete(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault sqsfake.Fault
	}{
		{"slow batch not applied", sqsfake.Fault{Delay: time.Hour}},
		{"applied response lost", sqsfake.Fault{LoseResponse: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
				f.Put(q, "ack", "")
				f.Put(q, "dead", "")
				f.Inject(func(op string, _ any) sqsfake.Fault {
					if op == "DeleteMessageBatch" {
						return tc.fault
					}
					return sqsfake.Fault{}
				})
				var rc runCounter
				stop := startOnFake(t, f, q, consumer.Config{
					Concurrency: 2,
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						rc.add(m)
						if m.Body == "dead" {
							return consumer.Permanent(errors.New("bad input"))
						}
						return nil
					}),
				})
				waitUntil(5*time.Minute, func() bool { return len(f.Messages(q)) == 0 })
				// Past another visibility timeout: nothing comes back.
				time.Sleep(time.Minute)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				for _, b := range []string{"ack", "dead"} {
					if runs, count, _ := rc.get(b); runs != 1 || count != 1 {
						t.Errorf("%s: handler ran %d times, receive count %d; want 1 and 1", b, runs, count)
					}
				}
				if n := len(f.Sent(dlq)); n != 1 {
					t.Errorf("%d dead letters sent, want 1", n)
				}
				if left := f.Messages(q); len(left) != 0 {
					t.Errorf("%d messages left in the queue, want none", len(left))
				}
				checkProblems(t, f)
			})
		})
	}
}

// TestFailedDeleteStaysUnderHeartbeat (issue 10, defect 2): every delete
// fails for three minutes (ten visibility timeouts). The message is kept
// invisible meanwhile, the failure is logged with its id and counted, and
// the delete goes through once SQS answers again: one run, one receive.
func TestFailedDeleteStaysUnderHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "20"}, nil)
		id := f.Put(q, "ack", "")
		outage := time.Now().Add(3 * time.Minute)
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if (op == "DeleteMessageBatch" || op == "DeleteMessage") && time.Now().Before(outage) {
				return sqsfake.Fault{Err: &smithy.GenericAPIError{Code: "InternalError", Message: "try again", Fault: smithy.FaultServer}}
			}
			return sqsfake.Fault{}
		})
		core, logs := observer.New(zapcore.InfoLevel)
		obs := &recordingObserver{}
		var rc runCounter
		stop := startOnFake(t, f, q, consumer.Config{
			Logger: zap.New(core), Observer: obs,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				rc.add(m)
				return nil
			}),
		})
		if !waitUntil(10*time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
			t.Errorf("message still in the queue ten minutes on: %+v", f.Messages(q))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if runs, count, _ := rc.get("ack"); runs != 1 || count != 1 {
			t.Errorf("handler ran %d times, receive count %d; want 1 and 1", runs, count)
		}
		settleFailed, _, lost := obs.counts()
		if settleFailed == 0 || lost != 0 {
			t.Errorf("SettleFailed ×%d, LeaseLost ×%d; want some and none", settleFailed, lost)
		}
		if n := logs.FilterLevelExact(zapcore.ErrorLevel).FilterField(zap.String("message_id", id)).FilterMessageSnippet("delete failed").Len(); n == 0 {
			t.Errorf("no error line about the failed delete with message_id %s", id)
		}
		checkProblems(t, f)
	})
}

// TestLateLongPollMessagesRun (issue 10, defect 7): messages that arrive
// 19s into a 20s long poll on a queue with a 5s visibility timeout run
// once, to the end, with a receive count of 1: their visibility counts
// from the response, not from the call.
func TestLateLongPollMessagesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "5"}, nil)
		obs := &recordingObserver{}
		var rc runCounter
		var finished atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 3, WaitTime: 20 * time.Second, Observer: obs,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				rc.add(m)
				select {
				case <-time.After(12 * time.Second): // longer than the visibility
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				finished.Add(1)
				return nil
			}),
		})
		time.Sleep(19 * time.Second) // the first long poll is 19s in
		for i := range 3 {
			f.Put(q, fmt.Sprint("late-", i), "")
		}
		waitUntil(2*time.Minute, func() bool { return finished.Load() == 3 && len(f.Messages(q)) == 0 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			b := fmt.Sprint("late-", i)
			if runs, count, _ := rc.get(b); runs != 1 || count != 1 {
				t.Errorf("%s: handler ran %d times, receive count %d; want 1 and 1", b, runs, count)
			}
		}
		if n := finished.Load(); n != 3 {
			t.Errorf("%d handlers ran to the end, want 3", n)
		}
		if _, _, lost := obs.counts(); lost != 0 {
			t.Errorf("%d leases lost, want none", lost)
		}
		checkProblems(t, f)
	})
}

// TestFIFOLostReceiveRetriedWithAttemptID (issue 10): the first FIFO
// receive hands out messages of two groups (several per group) and its
// response is lost. The receive is retried with the same
// ReceiveRequestAttemptId and gets the same messages: they run at once, in
// order, with a receive count of 1, instead of after the 60s visibility
// timeout. A new receive gets a new attempt id.
func TestFIFOLostReceiveRetriedWithAttemptID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(true, map[string]string{"VisibilityTimeout": "60"}, nil)
		for i := range 3 {
			f.Put(q, fmt.Sprint("a", i), "ga")
			if i < 2 {
				f.Put(q, fmt.Sprint("b", i), "gb")
			}
		}
		var mu sync.Mutex
		var attempts []string
		f.Inject(func(op string, in any) sqsfake.Fault {
			if op != "ReceiveMessage" {
				return sqsfake.Fault{}
			}
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, aws.ToString(in.(*sqs.ReceiveMessageInput).ReceiveRequestAttemptId))
			return sqsfake.Fault{LoseResponse: len(attempts) == 1}
		})
		var rc runCounter
		start := time.Now()
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 2, Prefetch: 10, Receivers: 1,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				rc.add(m)
				return nil
			}),
		})
		done := waitUntil(5*time.Minute, func() bool { return len(f.Messages(q)) == 0 })
		took := time.Since(start)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if !done || took >= 60*time.Second {
			t.Errorf("the queue emptied after %s (done %v), want well before the 60s visibility timeout", took, done)
		}
		rc.mu.Lock()
		var a, b []string
		for _, body := range rc.order {
			if body[0] == 'a' {
				a = append(a, body)
			} else {
				b = append(b, body)
			}
		}
		rc.mu.Unlock()
		if strings.Join(a, ",") != "a0,a1,a2" || strings.Join(b, ",") != "b0,b1" {
			t.Errorf("groups ran %v and %v, want a0,a1,a2 and b0,b1 once each, in order", a, b)
		}
		for _, body := range []string{"a0", "a1", "a2", "b0", "b1"} {
			if _, count, _ := rc.get(body); count != 1 {
				t.Errorf("%s: receive count %d, want 1", body, count)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) < 3 || attempts[0] == "" || attempts[1] != attempts[0] || attempts[2] == attempts[1] {
			t.Errorf("attempt ids %q: want the lost receive retried with its id, then a new id", attempts)
		}
		checkProblems(t, f)
	})
}

// TestDeadLetterRefusedOnFake (issue 10, defect 5): the DLQ's
// MaximumMessageSize is 1 KiB and the source's maxReceiveCount 2. A dead
// letter that fits once shrunk is sent; one that cannot fit is refused,
// retried after the backoff's ceiling (never at once) and moved by the
// queue's own maxReceiveCount. On FIFO, the refused message's group holds
// two more messages received with it: they run after it, in order.
func TestDeadLetterRefusedOnFake(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(kindName(fifo), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				suffix := ""
				if fifo {
					suffix = ".fifo"
				}
				f, q, dlq := onFake(fifo, map[string]string{
					"VisibilityTimeout": "30",
					"RedrivePolicy":     `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq` + suffix + `","maxReceiveCount":"2"}`,
				}, map[string]string{"MaximumMessageSize": "1024"})
				send := func(body, group string, attrs map[string]types.MessageAttributeValue) {
					in := &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body), MessageAttributes: attrs}
					if fifo {
						in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(body[:2]+group)
					}
					if _, err := f.SendMessage(context.Background(), in); err != nil {
						t.Fatal(err)
					}
				}
				big := "big" + strings.Repeat("b", 1000)
				send(big, "g-big", nil)
				send("n1", "g-big", nil)
				send("n2", "g-big", nil)
				fits := "fits" + strings.Repeat("f", 600)
				send(fits, "g-fits", map[string]types.MessageAttributeValue{
					"tenant":   {DataType: aws.String("String"), StringValue: aws.String("acme")},
					"zz-trace": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("t", 40))},
				})

				core, logs := observer.New(zapcore.InfoLevel)
				obs := &recordingObserver{}
				var rc runCounter
				stop := startOnFake(t, f, q, consumer.Config{
					Concurrency: 4, Prefetch: 10, Receivers: 1,
					Logger: zap.New(core), Observer: obs,
					Backoff: consumer.Backoff{Base: 10 * time.Second, RandFunc: func(int64) int64 { return 0 }},
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						rc.add(m)
						if m.Body == big || m.Body == fits {
							return consumer.Permanent(errors.New("invalid order: " + strings.Repeat("r", 1500)))
						}
						return nil
					}),
				})
				waitUntil(5*time.Minute, func() bool { return len(f.Messages(q)) == 0 })
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if n := logs.FilterMessageSnippet("MaximumMessageSize is smaller").Len(); n != 1 {
					t.Errorf("%d start-up warnings about the DLQ's MaximumMessageSize, want 1", n)
				}
				runs, _, at := rc.get(big)
				if runs != 2 || at[1].Sub(at[0]) < 10*time.Second {
					t.Errorf("refused message ran at %v, want twice (maxReceiveCount), 10s or more apart", at)
				}
				if _, refused, _ := obs.counts(); refused != 2 {
					t.Errorf("DeadLetterRefused ×%d, want 2", refused)
				}
				if n := logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("refused").Len(); n != 2 {
					t.Errorf("%d error lines about the refusal, want 2", n)
				}
				sent := f.Sent(dlq)
				var gotFits, gotBig bool
				moved := map[string]bool{}
				for _, s := range sent {
					switch {
					case s.Body == fits && s.MovedFrom == "":
						gotFits = s.Attributes[deadletter.AttrFailure].StringValue != nil
					case s.Body == big && s.MovedFrom == q:
						gotBig = true
					case s.MovedFrom == q:
						moved[s.Body] = true
					}
				}
				if !gotFits || !gotBig {
					t.Errorf("DLQ got %d messages (fits sent with its failure: %v; big moved by maxReceiveCount: %v), want both", len(sent), gotFits, gotBig)
				}
				// On FIFO, n1 and n2 come with the refused message in each
				// receive and are released unrun, so they share its receive
				// count: each either runs once after it, or is moved with it.
				_, _, bigAt := rc.get(big)
				var prev time.Time
				for _, b := range []string{"n1", "n2"} {
					runs, _, at := rc.get(b)
					switch {
					case !fifo && runs != 1:
						t.Errorf("%s ran %d times, want 1", b, runs)
					case fifo && runs+btoi(moved[b]) != 1:
						t.Errorf("%s ran %d times and moved %v, want one or the other", b, runs, moved[b])
					case fifo && runs == 1 && (at[0].Before(bigAt[len(bigAt)-1]) || at[0].Before(prev)):
						t.Errorf("%s ran out of order", b)
					}
					if runs == 1 {
						prev = at[0]
					}
				}
				checkProblems(t, f)
			})
		})
	}
}

// TestHeartbeatKeepsSlowHandlersInvisibleOnFake (issue 17): the timing
// half of the lifecycle test, on the fake's clock: a 2s visibility, 7s
// handlers; each runs once and no message is received twice.
func TestHeartbeatKeepsSlowHandlersInvisibleOnFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "2"}, nil)
		const n = 5
		for i := range n {
			f.Put(q, fmt.Sprint(i), "")
		}
		obs := &recordingObserver{}
		var rc runCounter
		var finished atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: n, Observer: obs,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				rc.add(m)
				select {
				case <-time.After(7 * time.Second):
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				finished.Add(1)
				return nil
			}),
		})
		waitUntil(time.Minute, func() bool { return finished.Load() == n && len(f.Messages(q)) == 0 })
		time.Sleep(2500 * time.Millisecond) // past another visibility timeout
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			b := fmt.Sprint(i)
			if runs, count, _ := rc.get(b); runs != 1 || count != 1 {
				t.Errorf("message %s: handler ran %d times, receive count %d; want 1 and 1", b, runs, count)
			}
		}
		if c := f.Calls("ChangeMessageVisibilityBatch"); c < 5 {
			t.Errorf("%d visibility extensions in 7s with a 2s visibility timeout", c)
		}
		if _, _, lost := obs.counts(); lost != 0 {
			t.Errorf("%d leases lost", lost)
		}
		if left := f.Messages(q); len(left) != 0 {
			t.Errorf("%d messages left", len(left))
		}
		checkProblems(t, f)
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
