package sqslambdatest_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/sqslambda"
	"github.com/sqsonce/sqsonce/sqslambda/sqslambdatest"
)

// One batch of three through an sqslambda function, as the event source
// mapping runs it: the order is handled and deleted; the malformed one is
// sent to the dead-letter queue by sqsonce, reported as a success and
// deleted; the busy one is the batch item failure, left on the queue to
// come back in a minute. The SQS here is a small stand-in defined below;
// in a test against the local stack, Client is an *sqs.Client.
func ExampleMapping_Poll() {
	ctx := context.Background()
	sqsClient := newTinySQS() // sqs.NewFromConfig(awsCfg) against the local stack

	// The function under test.
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

	bodies := map[string]string{} // MessageId → body
	for _, body := range []string{"order", "malformed", "busy"} {
		out, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(ordersURL), MessageBody: aws.String(body)})
		if err != nil {
			panic(err)
		}
		bodies[aws.ToString(out.MessageId)] = body
	}

	esm, err := sqslambdatest.New(ctx, sqslambdatest.Config{Client: sqsClient, QueueURL: ordersURL, HandleFunc: h.Handle})
	if err != nil {
		panic(err)
	}
	res, err := esm.Poll(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("records:", len(res.Invoked), "whole batch failed:", res.Err != nil)
	for _, id := range res.Deleted {
		fmt.Println("deleted:", bodies[id])
	}
	for _, id := range res.Failed {
		fmt.Println("left to come back:", bodies[id], "in", sqsClient.invisibleFor(id))
	}
	for _, body := range sqsClient.bodies(ordersDLQURL) {
		fmt.Println("dead-lettered:", body)
	}
	// Output:
	// records: 3 whole batch failed: false
	// deleted: order
	// deleted: malformed
	// left to come back: busy in 1m0s
	// dead-lettered: malformed
}

// Drain polls until the queue stays empty: here five messages in batches
// of two.
func ExampleMapping_Drain() {
	ctx := context.Background()
	sqsClient := newTinySQS()
	for i := range 5 {
		if _, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl: aws.String(ordersURL), MessageBody: aws.String(fmt.Sprintf(`{"order_id":"o-%d"}`, i)),
		}); err != nil {
			panic(err)
		}
	}
	h, err := sqslambda.New(sqslambda.Config{
		Client:  sqsClient,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error { return nil }),
	})
	if err != nil {
		panic(err)
	}
	esm, err := sqslambdatest.New(ctx, sqslambdatest.Config{
		Client: sqsClient, QueueURL: ordersURL, HandleFunc: h.Handle,
		BatchSize:     2,
		EmptyReceives: 1, // one empty receive (a 1s long poll on SQS) ends it
	})
	if err != nil {
		panic(err)
	}
	results, err := esm.Drain(ctx)
	if err != nil {
		panic(err)
	}
	for i, r := range results {
		fmt.Printf("invocation %d: %d records, %d deleted\n", i+1, len(r.Invoked), len(r.Deleted))
	}
	fmt.Println("left in the queue:", len(sqsClient.bodies(ordersURL)))
	// Output:
	// invocation 1: 2 records, 2 deleted
	// invocation 2: 2 records, 2 deleted
	// invocation 3: 1 records, 1 deleted
	// left in the queue: 0
}

// The stand-in's queues: "orders", whose RedrivePolicy names
// "orders-dlq", and that dead-letter queue.
const (
	ordersURL    = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"
	ordersDLQURL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-dlq"
	ordersARN    = "arn:aws:sqs:us-east-1:123456789012:orders"
)

// tinySQS stands in for SQS, for the examples. A message received is
// invisible for the queue's visibility timeout (30s), or as long as the
// last visibility change asked, then received again; a receive does not
// wait for messages. It implements sqslambdatest.SQSAPI, the mapping's
// calls, and sqslambda.SQSAPI, the function's.
type tinySQS struct {
	mu     sync.Mutex
	sent   int
	queues map[string][]*tinyMessage // URL → messages not deleted
}

type tinyMessage struct {
	id, body, handle string
	sentAt, firstAt  time.Time
	receives         int
	visibleAt        time.Time
	visibility       time.Duration // how long the last receive or change made it invisible
}

func newTinySQS() *tinySQS {
	return &tinySQS{queues: map[string][]*tinyMessage{ordersURL: nil, ordersDLQURL: nil}}
}

// SendMessage adds a message to a queue.
func (s *tinySQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	if _, ok := s.queues[url]; !ok {
		return nil, &types.QueueDoesNotExist{Message: aws.String(url)}
	}
	s.sent++
	m := &tinyMessage{id: "msg-" + strconv.Itoa(s.sent), body: aws.ToString(in.MessageBody), sentAt: time.Now()}
	s.queues[url] = append(s.queues[url], m)
	return &sqs.SendMessageOutput{MessageId: aws.String(m.id)}, nil
}

// ReceiveMessage returns up to MaxNumberOfMessages visible messages, each
// with a new receipt handle and the system attributes SQS gives.
func (s *tinySQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range s.queues[aws.ToString(in.QueueUrl)] {
		if len(out.Messages) == int(max(in.MaxNumberOfMessages, 1)) || now.Before(m.visibleAt) {
			continue
		}
		m.receives++
		if m.receives == 1 {
			m.firstAt = now
		}
		m.handle = fmt.Sprintf("%s#%d", m.id, m.receives)
		m.visibility = 30 * time.Second
		m.visibleAt = now.Add(m.visibility)
		out.Messages = append(out.Messages, types.Message{
			MessageId: aws.String(m.id), ReceiptHandle: aws.String(m.handle), Body: aws.String(m.body),
			Attributes: map[string]string{
				"ApproximateReceiveCount":          strconv.Itoa(m.receives),
				"SentTimestamp":                    strconv.FormatInt(m.sentAt.UnixMilli(), 10),
				"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstAt.UnixMilli(), 10),
			},
		})
	}
	return out, nil
}

// DeleteMessageBatch deletes the messages of the entries' handles; a
// handle that is not a message's latest is refused.
func (s *tinySQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		i := s.byHandle(url, aws.ToString(e.ReceiptHandle))
		if i < 0 {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			continue
		}
		s.queues[url] = append(s.queues[url][:i], s.queues[url][i+1:]...)
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// ChangeMessageVisibility makes a received message visible again
// VisibilityTimeout seconds from now.
func (s *tinySQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	i := s.byHandle(url, aws.ToString(in.ReceiptHandle))
	if i < 0 {
		return nil, &types.ReceiptHandleIsInvalid{Message: in.ReceiptHandle}
	}
	m := s.queues[url][i]
	m.visibility = time.Duration(in.VisibilityTimeout) * time.Second
	m.visibleAt = time.Now().Add(m.visibility)
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// ChangeMessageVisibilityBatch is ChangeMessageVisibility for each entry
// (the function's heartbeat).
func (s *tinySQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if _, err := s.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: in.QueueUrl, ReceiptHandle: e.ReceiptHandle, VisibilityTimeout: e.VisibilityTimeout,
		}); err != nil {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			continue
		}
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// GetQueueUrl returns the URL of "orders" or "orders-dlq".
func (s *tinySQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	url := "https://sqs.us-east-1.amazonaws.com/123456789012/" + aws.ToString(in.QueueName)
	if _, ok := s.queues[url]; !ok {
		return nil, &types.QueueDoesNotExist{Message: in.QueueName}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(url)}, nil
}

// GetQueueAttributes returns the attributes the mapping and the function
// read.
func (s *tinySQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	attrs := map[string]string{"VisibilityTimeout": "30", "MaximumMessageSize": "1048576"}
	if aws.ToString(in.QueueUrl) == ordersURL {
		attrs["QueueArn"] = ordersARN
		attrs["RedrivePolicy"] = `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

// byHandle returns the index in the queue at url of the message whose
// latest receipt handle is h, or -1; s.mu is held.
func (s *tinySQS) byHandle(url, h string) int {
	for i, m := range s.queues[url] {
		if m.handle == h {
			return i
		}
	}
	return -1
}

// bodies returns the bodies of the messages in the queue at url.
func (s *tinySQS) bodies(url string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.queues[url] {
		out = append(out, m.body)
	}
	return out
}

// invisibleFor returns how long the last receive or visibility change of
// the message with id made it invisible.
func (s *tinySQS) invisibleFor(id string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.queues[ordersURL] {
		if m.id == id {
			return m.visibility
		}
	}
	return 0
}
