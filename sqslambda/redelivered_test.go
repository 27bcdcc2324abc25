package sqslambda_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
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
