package sqslambda_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// A batch of three: one acked, one permanent failure (sent to the DLQ by
// sqsonce, so Lambda may delete it), one to retry in a minute: the only
// batch item failure of the partial batch response, its visibility set to
// a minute. In a function, pass h.Handle to lambda.Start and an
// *sqs.Client as Client.
func ExampleHandler_Handle() {
	ctx := context.Background()
	sqsClient := newTinySQS() // sqs.NewFromConfig(awsCfg) in a function

	h, err := sqslambda.New(sqslambda.Config{
		Client: sqsClient,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			switch m.Body {
			case "malformed":
				return consumer.Permanent(errors.New("cannot parse the order"))
			case "busy":
				return consumer.RetryAfter(errors.New("warehouse busy"), time.Minute)
			}
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}

	// The event Lambda passes: a batch the event source mapping received
	// from the queue "orders".
	var ev events.SQSEvent
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i, body := range []string{"order", "malformed", "busy"} {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId:     fmt.Sprint("id-", body),
			ReceiptHandle: fmt.Sprint("handle-", i),
			Body:          body,
			Attributes: map[string]string{
				"ApproximateReceiveCount":          "1",
				"SentTimestamp":                    now,
				"ApproximateFirstReceiveTimestamp": now,
			},
			EventSource:    "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
			AWSRegion:      "us-east-1",
		})
	}

	resp, _ := h.Handle(ctx, ev) // never an error: failures are per record
	for _, f := range resp.BatchItemFailures {
		fmt.Println("batch item failure:", f.ItemIdentifier)
	}
	for _, body := range sqsClient.deadLettered() {
		fmt.Println("dead-lettered:", body)
	}
	fmt.Println("visible again in:", sqsClient.visibility("handle-2"))
	// Output:
	// batch item failure: id-busy
	// dead-lettered: malformed
	// visible again in: 1m0s
}

// tinySQS stands in for SQS, for the example: the queue "orders", whose
// RedrivePolicy names "orders-dlq", and that dead-letter queue. It keeps
// the bodies sent to the dead-letter queue and the last visibility asked
// for each receipt handle. It implements sqslambda.SQSAPI.
type tinySQS struct {
	mu   sync.Mutex
	dlq  []string
	seen map[string]int32 // receipt handle → visibility timeout, seconds
}

const tinyURL = "https://sqs.us-east-1.amazonaws.com/123456789012/"

func newTinySQS() *tinySQS { return &tinySQS{seen: map[string]int32{}} }

// GetQueueUrl returns the URL of a queue of the account.
func (s *tinySQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(tinyURL + aws.ToString(in.QueueName))}, nil
}

// GetQueueAttributes returns the attributes the handler reads: the
// visibility timeout and, for "orders", the RedrivePolicy.
func (s *tinySQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	attrs := map[string]string{"VisibilityTimeout": "30", "MaximumMessageSize": "1048576"}
	if aws.ToString(in.QueueUrl) == tinyURL+"orders" {
		attrs["RedrivePolicy"] = `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

// SendMessage keeps a message sent to the dead-letter queue.
func (s *tinySQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !strings.HasSuffix(aws.ToString(in.QueueUrl), "/orders-dlq") {
		return nil, fmt.Errorf("tinySQS: no queue %s", aws.ToString(in.QueueUrl))
	}
	s.dlq = append(s.dlq, aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprint("dl-", len(s.dlq)))}, nil
}

// ChangeMessageVisibility records a visibility change.
func (s *tinySQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[aws.ToString(in.ReceiptHandle)] = in.VisibilityTimeout
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// ChangeMessageVisibilityBatch records the visibility changes of a
// heartbeat.
func (s *tinySQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		s.seen[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// deadLettered returns the bodies sent to the dead-letter queue.
func (s *tinySQS) deadLettered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.dlq...)
}

// visibility returns the last visibility timeout asked for handle.
func (s *tinySQS) visibility(handle string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.seen[handle]) * time.Second
}
