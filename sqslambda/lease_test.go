package sqslambda_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// claimLog is a dedupe.Store that records when each claim's lease ends.
type claimLog struct {
	dedupe.Store
	mu    sync.Mutex
	until []time.Time
}

func (s *claimLog) Claim(ctx context.Context, key, fp string, lease time.Duration) (dedupe.Claim, error) {
	s.mu.Lock()
	s.until = append(s.until, time.Now().Add(lease))
	s.mu.Unlock()
	return s.Store.Claim(ctx, key, fp, lease)
}

// eventOf is the event source mapping's record for a message received
// from the queue named name.
func eventOf(m types.Message, name string) events.SQSMessage {
	attrs := map[string]events.SQSMessageAttribute{}
	for k, v := range m.MessageAttributes {
		attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
	}
	return events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Attributes: m.Attributes, MessageAttributes: attrs,
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:" + name, EventSource: "aws:sqs", AWSRegion: "us-east-1",
	}
}

// TestLeaseCoversTheInvocation: with the default dedupe options (a
// 1-minute lease), a record whose handler runs 10 minutes of a 15-minute
// invocation keeps its key for the whole run: a second copy of the job
// (same sqsonce-id) arriving in another invocation 5 minutes in is
// reported for retry without running, and the lease ends by the first
// invocation's deadline.
func TestLeaseCoversTheInvocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := sqsfake.New()
		dlqURL := f.AddQueue("orders-dlq", nil)
		queueURL := f.AddQueue("orders", map[string]string{"VisibilityTimeout": "5400"}) // 6 × the function timeout
		ctx := context.Background()
		for range 2 { // the job, and a producer's retry of it
			if _, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("body"),
				MessageAttributes: map[string]types.MessageAttributeValue{
					consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String("job-1")},
				}}); err != nil {
				t.Fatal(err)
			}
		}
		receiveOne := func() events.SQSMessage {
			out, err := f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1,
				MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
			if err != nil || len(out.Messages) != 1 {
				t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
			}
			return eventOf(out.Messages[0], "orders")
		}

		var (
			mu  sync.Mutex
			ran []string
		)
		store := &claimLog{Store: dedupe.NewMemory(dedupe.MemoryConfig{})}
		h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
			mu.Lock()
			ran = append(ran, msg.ID)
			mu.Unlock()
			select {
			case <-time.After(10 * time.Minute):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		dd, err := dedupe.New(dedupe.Config{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		a, err := sqslambda.New(sqslambda.Config{
			Client: f, Handler: h, QueueURL: queueURL, DeadLetterQueueURL: dlqURL,
			Middleware: []consumer.Middleware{dd.Wrap},
		})
		if err != nil {
			t.Fatal(err)
		}
		invoke := func(r events.SQSMessage) string {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			resp, err := a.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{r}})
			if err != nil {
				t.Errorf("invocation of %s: %v", r.MessageId, err)
			}
			var ids []string
			for _, f := range resp.BatchItemFailures {
				ids = append(ids, f.ItemIdentifier)
			}
			return strings.Join(ids, ",")
		}

		copy1 := receiveOne()
		var wg sync.WaitGroup
		var first, second string
		wg.Go(func() { first = invoke(copy1) })
		time.Sleep(5 * time.Minute)
		copy2 := receiveOne()
		wg.Go(func() { second = invoke(copy2) })
		wg.Wait()

		if first != "" {
			t.Errorf("first invocation: batchItemFailures %q, want none", first)
		}
		if second != copy2.MessageId {
			t.Errorf("second invocation: batchItemFailures %q, want %s (retried: the key is held)", second, copy2.MessageId)
		}
		if got := strings.Join(ran, ","); got != copy1.MessageId {
			t.Fatalf("handler ran for %s, want %s only: the second copy took the key over from a live owner", got, copy1.MessageId)
		}
		if len(store.until) == 0 {
			t.Fatal("no claim recorded")
		}
		end, deadline := start.Add(10*time.Minute), start.Add(15*time.Minute)
		if until := store.until[0]; until.Before(end) || until.After(deadline) {
			t.Errorf("first claim leased until %s: want past the handler's end %s and by the deadline %s", until, end, deadline)
		}
		if p := f.Problems(); len(p) > 0 {
			t.Errorf("SQS contract violations: %v", p)
		}
	})
}
