package sqslambda_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// TestVisibilityBeganBeforeTheInvocation (issue 42, defect 3): the event
// source mapping received the record well before the invocation began (a
// batching window, a delay of the mapping), on a queue with a 30s
// visibility. Whether the record is a redelivery (SQS gives no time for
// its last receive) or a first receive (dated by
// ApproximateFirstReceiveTimestamp), its visibility is extended before it
// runs out: another poller receives nothing while the invocation runs,
// the handler runs to the end once, and the mapping's delete with the
// record's handle removes the message.
func TestVisibilityBeganBeforeTheInvocation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		redelivery bool
		window     time.Duration // from the mapping's receive to the invocation
	}{
		{"redelivered, 15s window", true, 15 * time.Second},
		{"redelivered, 25s window", true, 25 * time.Second},
		{"first receive, 25s window", false, 25 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, url, arn, _ := fakeQueues(false, map[string]string{"VisibilityTimeout": "30"}, nil)
				f.Put(url, "job", "")
				if tc.redelivery {
					// An earlier receive whose handler failed: visible again.
					first := fakeEvent(t, f, url, arn, 1)
					if _, err := f.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{
						QueueUrl: aws.String(url), ReceiptHandle: aws.String(first.Records[0].ReceiptHandle), VisibilityTimeout: 0,
					}); err != nil {
						t.Fatal(err)
					}
					time.Sleep(time.Minute)
				}
				ev := fakeEvent(t, f, url, arn, 1)
				time.Sleep(tc.window)
				start := time.Now()

				var mu sync.Mutex
				var stolen []string
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Go(func() { // another consumer of the queue
					for {
						select {
						case <-stop:
							return
						default:
						}
						out, err := f.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
						if err == nil && len(out.Messages) > 0 {
							mu.Lock()
							stolen = append(stolen, fmt.Sprintf("another poller, %s into the invocation: got %d message(s)", time.Since(start), len(out.Messages)))
							mu.Unlock()
						}
					}
				})
				var runs int
				var finished bool
				a := newHandler(t, f, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
					mu.Lock()
					runs++
					mu.Unlock()
					select {
					case <-time.After(40 * time.Second):
					case <-ctx.Done():
						return context.Cause(ctx)
					}
					mu.Lock()
					finished = true
					mu.Unlock()
					return nil
				}), nil)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				resp, err := a.Handle(ctx, ev)
				cancel()
				close(stop)
				wg.Wait()
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Errorf("Handle = %v, %v; want no failures", resp.BatchItemFailures, err)
				}
				settleEvent(t, f, url, ev, resp)
				mu.Lock()
				defer mu.Unlock()
				if len(stolen) != 0 {
					t.Errorf("%s; want none while the invocation runs", strings.Join(stolen, "; "))
				}
				if runs != 1 || !finished {
					t.Errorf("handler ran %d times (finished: %v), want once, to the end", runs, finished)
				}
				if left := f.Messages(url); len(left) != 0 {
					t.Errorf("%d messages left after the mapping's delete, want none", len(left))
				}
				var refused []string
				for _, v := range f.VisibilityLog() {
					if v.Err != "" {
						refused = append(refused, v.Err)
					}
				}
				if len(refused) != 0 {
					t.Errorf("visibility changes refused: %v", refused)
				}
				problems(t, f)
			})
		})
	}
}

// TestQuickRetryOfARedeliveryStands: a batch of two redelivered records,
// both extended at once when the invocation starts. One fails at once with
// a 5s retry delay while that extension is still on its way (held 2s
// before SQS applies it); the other runs 10s. The delay is set after the
// extension lands, not undone by it: the failed message can be received
// again 8s into the invocation, not only after another 30s.
func TestQuickRetryOfARedeliveryStands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, arn, _ := fakeQueues(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		f.Put(url, "fails", "")
		f.Put(url, "slow", "")
		first := fakeEvent(t, f, url, arn, 2)
		for _, r := range first.Records {
			if _, err := f.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(url), ReceiptHandle: aws.String(r.ReceiptHandle), VisibilityTimeout: 0,
			}); err != nil {
				t.Fatal(err)
			}
		}
		ev := fakeEvent(t, f, url, arn, 2) // received again: count 2
		start := time.Now()
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ChangeMessageVisibilityBatch" && time.Since(start) < time.Second {
				return sqsfake.Fault{Delay: 2 * time.Second}
			}
			return sqsfake.Fault{}
		})
		var mu sync.Mutex
		var got []string
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // another consumer of the queue, 8s into the invocation
			select {
			case <-stop:
				return
			case <-time.After(8 * time.Second):
			}
			out, err := f.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range out.Messages {
				got = append(got, aws.ToString(m.Body))
			}
		})
		a := newHandler(t, f, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			if m.Body == "fails" {
				return consumer.RetryAfter(errors.New("downstream busy"), 5*time.Second)
			}
			select {
			case <-time.After(10 * time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}), func(c *sqslambda.Config) { c.Concurrency = 2 })
		resp, err := a.Handle(context.Background(), ev)
		close(stop)
		wg.Wait()
		if err != nil || len(resp.BatchItemFailures) != 1 {
			t.Fatalf("Handle = %v, %v; want one failure", resp.BatchItemFailures, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(got, ",") != "fails" {
			var log []string
			for _, v := range f.VisibilityLog() {
				log = append(log, fmt.Sprintf("%s %ds at %s %s", v.MessageID, v.Seconds, v.At.Sub(start), v.Err))
			}
			t.Errorf("8s into the invocation another poller got %v, want the message retried after 5s; visibility changes: %s", got, strings.Join(log, ", "))
		}
		problems(t, f)
	})
}
