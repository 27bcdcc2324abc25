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

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// fakeQueues makes a queue "jobs" (jobs.fifo when fifo) and its DLQ on a
// new sqsfake.Fake; attrs are added to the queue's, dlqAttrs to the DLQ's.
// It returns the fake, the queue's URL and ARN, and the DLQ's URL.
func fakeQueues(fifo bool, attrs, dlqAttrs map[string]string) (f *sqsfake.Fake, url, arn, dlq string) {
	f = sqsfake.New()
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	dlq = f.AddQueue("jobs-dlq"+suffix, dlqAttrs)
	a := map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:jobs-dlq` + suffix + `","maxReceiveCount":"100"}`,
	}
	for k, v := range attrs {
		a[k] = v
	}
	url = f.AddQueue("jobs"+suffix, a)
	return f, url, "arn:aws:sqs:us-east-1:123456789012:jobs" + suffix, dlq
}

// fakeEvent receives n messages from the fake, as an event source
// mapping does (several receives if need be), and turns them into an
// event.
func fakeEvent(t *testing.T, f *sqsfake.Fake, url, arn string, n int) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	for len(ev.Records) < n {
		out, err := f.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: int32(min(10, n-len(ev.Records))), WaitTimeSeconds: 1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(out.Messages) == 0 {
			t.Fatalf("received %d messages, want %d", len(ev.Records), n)
		}
		for _, m := range out.Messages {
			r := events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSourceARN: arn, EventSource: "aws:sqs",
			}
			for name, v := range m.MessageAttributes {
				if r.MessageAttributes == nil {
					r.MessageAttributes = map[string]events.SQSMessageAttribute{}
				}
				r.MessageAttributes[name] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
			}
			ev.Records = append(ev.Records, r)
		}
	}
	return ev
}

// settleEvent deletes the records not reported as failures, as the event
// source mapping does when the invocation returns.
func settleEvent(t *testing.T, f *sqsfake.Fake, url string, ev events.SQSEvent, resp events.SQSEventResponse) {
	t.Helper()
	failed := map[string]bool{}
	for _, x := range resp.BatchItemFailures {
		failed[x.ItemIdentifier] = true
	}
	for _, r := range ev.Records {
		if !failed[r.MessageId] {
			if _, err := f.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(r.ReceiptHandle)}); err != nil {
				t.Fatalf("delete %s: %v", r.MessageId, err)
			}
		}
	}
}

func problems(t *testing.T, f *sqsfake.Fake) {
	t.Helper()
	for _, p := range f.Problems() {
		t.Errorf("SQS contract violation: %s", p)
	}
}

// TestBatchLongerThanVisibilityStaysInvisible (issue 10, defect 8): a
// batch of five 20s records, one at a time, on a queue with a 30s
// visibility timeout. While the invocation runs (100s), another poller
// receives nothing: every record, finished or not, stays invisible until
// the invocation returns. On FIFO the batch holds several messages of
// each group.
func TestBatchLongerThanVisibilityStaysInvisible(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		name := "standard"
		if fifo {
			name = "fifo"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, url, arn, _ := fakeQueues(fifo, map[string]string{"VisibilityTimeout": "30"}, nil)
				groups := []string{"ga", "ga", "gb", "gb", "gc"}
				for i, g := range groups {
					f.Put(url, fmt.Sprint("m", i), g)
				}
				ev := fakeEvent(t, f, url, arn, len(groups))

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
						if err == nil {
							mu.Lock()
							for _, m := range out.Messages {
								stolen = append(stolen, aws.ToString(m.Body)+"@"+time.Now().Format("05.000"))
							}
							mu.Unlock()
						}
					}
				})
				var ran []string
				a := newHandler(t, f, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
					mu.Lock()
					ran = append(ran, m.Body)
					mu.Unlock()
					select {
					case <-time.After(20 * time.Second):
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				}), nil)
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
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
					t.Errorf("received by another consumer while the batch ran: %v", stolen)
				}
				if strings.Join(ran, ",") != "m0,m1,m2,m3,m4" {
					t.Errorf("ran %v, want each record once, in order", ran)
				}
				if left := f.Messages(url); len(left) != 0 {
					t.Errorf("%d messages left after the batch", len(left))
				}
				problems(t, f)
			})
		})
	}
}

// TestFIFOBatchOnFake: a FIFO batch with several messages per group (as
// SQS sends it). After a1 fails, a2 is not run and both come back, in
// order, once a1's retry delay is over; group gb is not held up.
func TestFIFOBatchOnFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, arn, _ := fakeQueues(true, map[string]string{"VisibilityTimeout": "30"}, nil)
		for _, b := range []string{"a0", "b0", "a1", "b1", "a2"} {
			f.Put(url, b, "g"+b[:1])
		}
		var mu sync.Mutex
		var ran []string
		failed := false
		a := newHandler(t, f, consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, m.Body)
			if m.Body == "a1" && !failed {
				failed = true
				return consumer.RetryAfter(errors.New("busy"), 5*time.Second)
			}
			return nil
		}), func(c *sqslambda.Config) { c.Concurrency = 2 })

		ev := fakeEvent(t, f, url, arn, 5)
		resp, _ := a.Handle(context.Background(), ev)
		settleEvent(t, f, url, ev, resp)
		if n := len(resp.BatchItemFailures); n != 2 {
			t.Errorf("%d failures, want 2 (a1 retried, a2 not run)", n)
		}
		// The group comes back once a1's delay is over, in order.
		time.Sleep(5 * time.Second)
		ev = fakeEvent(t, f, url, arn, 2)
		resp, _ = a.Handle(context.Background(), ev)
		settleEvent(t, f, url, ev, resp)

		mu.Lock()
		defer mu.Unlock()
		var ga, gb []string
		for _, b := range ran {
			if b[0] == 'a' {
				ga = append(ga, b)
			} else {
				gb = append(gb, b)
			}
		}
		if strings.Join(ga, ",") != "a0,a1,a1,a2" || strings.Join(gb, ",") != "b0,b1" {
			t.Errorf("ran ga %v and gb %v, want a0,a1,a1,a2 and b0,b1", ga, gb)
		}
		if left := f.Messages(url); len(left) != 0 {
			t.Errorf("%d messages left", len(left))
		}
		problems(t, f)
	})
}

// TestDeadLetterRefusedOnFakeLambda (issue 10, defect 5): on the fake, a
// 1 KiB DLQ takes the dead letter that fits once shrunk; the one that
// cannot fit is a failure with the backoff's ceiling as visibility (never
// 0), counted and logged; on FIFO the rest of its group waits.
func TestDeadLetterRefusedOnFakeLambda(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		name := "standard"
		if fifo {
			name = "fifo"
		}
		t.Run(name, func(t *testing.T) {
			f, url, arn, dlq := fakeQueues(fifo, map[string]string{"VisibilityTimeout": "30"}, map[string]string{"MaximumMessageSize": "1024"})
			big := "big" + strings.Repeat("b", 1000)
			fits := "fits" + strings.Repeat("f", 600)
			f.Put(url, big, "g-big")
			f.Put(url, "n1", "g-big")
			if _, err := f.SendMessage(context.Background(), &sqs.SendMessageInput{
				QueueUrl: aws.String(url), MessageBody: aws.String(fits),
				MessageGroupId: groupIf(fifo, "g-fits"), MessageDeduplicationId: groupIf(fifo, "fits"),
				MessageAttributes: map[string]types.MessageAttributeValue{
					"tenant":   {DataType: aws.String("String"), StringValue: aws.String("acme")},
					"zz-trace": {DataType: aws.String("String"), StringValue: aws.String(strings.Repeat("t", 40))},
				},
			}); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.InfoLevel)
			obs := &refusedObserver{}
			a, err := sqslambda.New(sqslambda.Config{
				Client: f, QueueURL: url, FunctionTimeout: 10 * time.Second, Logger: zap.New(core), Observer: obs,
				Backoff: consumer.Backoff{Base: 10 * time.Second, RandFunc: func(int64) int64 { return 0 }},
				Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
					if m.Body == "n1" {
						return nil
					}
					return consumer.Permanent(errors.New("invalid order: " + strings.Repeat("r", 1500)))
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			_ = a.Check(context.Background())
			if n := logs.FilterMessageSnippet("MaximumMessageSize is smaller").Len(); n != 1 {
				t.Errorf("%d start-up warnings about the DLQ's MaximumMessageSize, want 1", n)
			}
			ev := fakeEvent(t, f, url, arn, 3)
			resp, _ := a.Handle(context.Background(), ev)
			settleEvent(t, f, url, ev, resp)

			ids := map[string]string{}
			for _, r := range ev.Records {
				ids[r.Body] = r.MessageId
			}
			want := ids[big]
			if fifo {
				want += "," + ids["n1"]
			}
			var got []string
			for _, x := range resp.BatchItemFailures {
				got = append(got, x.ItemIdentifier)
			}
			if strings.Join(got, ",") != want {
				t.Errorf("failures %v, want %s", got, want)
			}
			sent := f.Sent(dlq)
			if len(sent) != 1 || sent[0].Body != fits || sent[0].Attributes[deadletter.AttrFailure].StringValue == nil {
				t.Errorf("DLQ got %d messages, want the one that fits, with its failure", len(sent))
			}
			vis := map[string]int32{}
			for _, v := range f.VisibilityLog() {
				if v.Err == "" {
					vis[v.MessageID] = v.Seconds
				}
			}
			if s, ok := vis[ids[big]]; !ok || s < 10 {
				t.Errorf("refused message's visibility %d (set %v), want the 10s backoff", s, ok)
			}
			if obs.refused.Load() != 1 || logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("refused").Len() != 1 {
				t.Errorf("DeadLetterRefused ×%d and %d error lines, want 1 and 1", obs.refused.Load(), logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("refused").Len())
			}
			problems(t, f)
		})
	}
}

func groupIf(fifo bool, s string) *string {
	if fifo {
		return aws.String(s)
	}
	return nil
}
