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
	"github.com/sqsonce/sqsonce/sqslambda"
)

// leaseSQS answers the calls the adapter makes for one standard queue
// whose URL and dead-letter queue are configured: every call succeeds.
type leaseSQS struct{ sqslambda.SQSAPI }

func (leaseSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"VisibilityTimeout": "5400"}}, nil
}

func (leaseSQS) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (leaseSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// TestLeaseCoversTheInvocation: with the default dedupe options (a
// 1-minute lease) a record whose handler runs 10 minutes of a 15-minute
// invocation keeps its key for the whole run; a second copy of the job
// (same sqsonce-id) arriving in another invocation 5 minutes in is
// reported for retry without running, and the lease ends by the
// invocation's deadline.
func TestLeaseCoversTheInvocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var (
			mu  sync.Mutex
			ran []string
		)
		store := dedupe.NewMemory(dedupe.MemoryConfig{})
		recorder := &leaseRecorder{Store: store}
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
		a, err := sqslambda.New(sqslambda.Config{
			Client: leaseSQS{}, Handler: h, QueueURL: stdURL, DeadLetterQueueURL: dlqURL,
			Middleware: []consumer.Middleware{dedupe.Middleware(recorder, dedupe.Options{})},
		})
		if err != nil {
			t.Fatal(err)
		}
		job := func(id string) events.SQSMessage {
			r := rec(stdARN, id, "body", "")
			r.MessageAttributes = map[string]events.SQSMessageAttribute{
				consumer.AttrID: {DataType: "String", StringValue: aws.String("job-1")},
			}
			return r
		}
		invoke := func(r events.SQSMessage) string {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			resp, err := a.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{r}})
			if err != nil {
				t.Errorf("invocation of %s: %v", r.MessageId, err)
			}
			return failures(resp)
		}
		var wg sync.WaitGroup
		var first, second string
		wg.Go(func() { first = invoke(job("copy-1")) })
		time.Sleep(5 * time.Minute)
		wg.Go(func() { second = invoke(job("copy-2")) })
		wg.Wait()

		if first != "" {
			t.Errorf("first invocation: batchItemFailures %q, want none", first)
		}
		if second != "copy-2" {
			t.Errorf("second invocation: batchItemFailures %q, want copy-2 (retried: the key is held)", second)
		}
		if got := strings.Join(ran, ","); got != "copy-1" {
			t.Fatalf("handler ran for %s, want copy-1 only: the second copy took the key over from a live owner", got)
		}
		// The claim lasts past the handler's 10 minutes, and not past the
		// first invocation's deadline.
		if len(recorder.leases) == 0 {
			t.Fatal("no claim recorded")
		}
		end, deadline := start.Add(10*time.Minute), start.Add(15*time.Minute)
		if until := recorder.leases[0]; until.Before(end) || until.After(deadline) {
			t.Errorf("first claim leased until %s: want past the handler's end %s and by the deadline %s", until, end, deadline)
		}
	})
}
