package opshttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/opshttp"
)

// /healthz and /readyz of a worker with one consumer, before it runs,
// while it runs, and after it drained. In a program, opshttp.Listen serves
// them on an address of their own (and Config.Metrics adds /metrics).
func Example() {
	sqsClient := newTinySQS("o-1") // sqs.NewFromConfig(awsCfg) in a program
	handled := make(chan struct{})
	c, err := consumer.New(consumer.Config{
		Client:    sqsClient,
		QueueName: "orders", // its RedrivePolicy names the dead-letter queue
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
			close(handled)
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	mux, err := opshttp.New(opshttp.Config{Ready: []opshttp.Readier{c}})
	if err != nil {
		panic(err)
	}
	get := func(path string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Printf("%s %d %s", path, rec.Code, rec.Body)
	}

	get("/healthz")
	get("/readyz") // Run has not started

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-handled
	get("/readyz") // receiving

	cancel() // SIGTERM: from here /readyz is 503 while the drain runs
	if err := <-done; err != nil {
		panic(err)
	}
	get("/readyz")
	fmt.Println("deleted:", sqsClient.deletedBodies())
	// Output:
	// /healthz 200 ok
	// /readyz 503 not ready: consumer: not running
	// /readyz 200 ready
	// /readyz 503 not ready: consumer: not running
	// deleted: [o-1]
}

// tinySQS stands in for SQS, for the example: the queue "orders", whose
// RedrivePolicy names "orders-dlq", holding the messages it was made with.
// A receive returns them once; when there is nothing to return it waits,
// as a long poll does, until its context ends. It implements
// consumer.SQSAPI.
type tinySQS struct {
	mu      sync.Mutex
	queued  []string          // bodies not yet received
	handles map[string]string // receipt handle → body, received and not deleted
	deleted []string
}

const tinyURL = "https://sqs.us-east-1.amazonaws.com/123456789012/"

func newTinySQS(bodies ...string) *tinySQS {
	return &tinySQS{queued: bodies, handles: map[string]string{}}
}

// GetQueueUrl returns the URL of a queue of the account.
func (s *tinySQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(tinyURL + aws.ToString(in.QueueName))}, nil
}

// GetQueueAttributes returns what the consumer checks at start-up.
func (s *tinySQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	attrs := map[string]string{"VisibilityTimeout": "30", "MaximumMessageSize": "1048576"}
	if aws.ToString(in.QueueUrl) == tinyURL+"orders" {
		attrs["RedrivePolicy"] = `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

// ReceiveMessage returns the queued messages, or waits for ctx to end.
func (s *tinySQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.mu.Lock()
	n := min(len(s.queued), int(in.MaxNumberOfMessages))
	out := &sqs.ReceiveMessageOutput{}
	for _, body := range s.queued[:n] {
		h := fmt.Sprint("handle-", len(s.handles)+len(s.deleted)+1)
		s.handles[h] = body
		out.Messages = append(out.Messages, types.Message{
			MessageId: aws.String("id-" + body), ReceiptHandle: aws.String(h), Body: aws.String(body),
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	s.queued = s.queued[n:]
	s.mu.Unlock()
	if len(out.Messages) > 0 {
		return out, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// DeleteMessage deletes the message of a receipt handle.
func (s *tinySQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if body, ok := s.handles[aws.ToString(in.ReceiptHandle)]; ok {
		delete(s.handles, aws.ToString(in.ReceiptHandle))
		s.deleted = append(s.deleted, body)
	}
	return &sqs.DeleteMessageOutput{}, nil
}

// DeleteMessageBatch is DeleteMessage for each entry.
func (s *tinySQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		_, _ = s.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: in.QueueUrl, ReceiptHandle: e.ReceiptHandle})
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// ChangeMessageVisibility accepts the change; the example's messages are
// all acked.
func (s *tinySQS) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// ChangeMessageVisibilityBatch accepts every entry.
func (s *tinySQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// SendMessage accepts a dead letter; the example sends none.
func (s *tinySQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return &sqs.SendMessageOutput{MessageId: aws.String("dead-letter")}, nil
}

// deletedBodies returns the bodies of the deleted messages.
func (s *tinySQS) deletedBodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deleted...)
}
