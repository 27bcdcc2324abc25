package heartbeat_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/heartbeat"
)

// A plain ReceiveMessage loop whose work takes longer than the queue's
// visibility timeout: the Keeper keeps each message invisible until it is
// deleted, so no other consumer receives it meanwhile.
func ExampleKeeper() {
	client := newTinySQS(time.Second, "order-1", "order-2") // an *sqs.Client in real code
	queueURL := "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"

	keeper, err := heartbeat.New(heartbeat.Config{
		Client:     client,
		QueueURL:   queueURL,
		Visibility: time.Second, // the queue's VisibilityTimeout
		Interval:   500 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- keeper.Run(ctx) }()

	for {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
		})
		if err != nil {
			log.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break // the queue is empty: the batch job is done
		}
		// Every handle is kept from its receive, also those waiting their turn.
		lost := map[string]<-chan error{}
		for _, m := range out.Messages {
			lost[*m.ReceiptHandle] = keeper.Add(*m.ReceiptHandle, time.Now())
		}
		for _, m := range out.Messages {
			err := work(lost[*m.ReceiptHandle])
			keeper.Remove(*m.ReceiptHandle) // before the delete
			if err != nil {
				fmt.Printf("%s: %v\n", *m.Body, err) // another consumer may have it: leave it
				continue
			}
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				fmt.Printf("%s: delete: %v\n", *m.Body, err)
				continue
			}
			fmt.Printf("%s: done and deleted, received %d time(s)\n", *m.Body, client.receives(*m.Body))
		}
	}
	cancel()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	// Output:
	// order-1: done and deleted, received 1 time(s)
	// order-2: done and deleted, received 1 time(s)
}

// work stands in for a job that takes longer than the visibility timeout.
// It gives up when the Keeper reports the message lost.
func work(lost <-chan error) error {
	select {
	case <-time.After(1200 * time.Millisecond):
		return nil
	case err := <-lost:
		return err
	}
}

// tinySQS is a one-queue stand-in for SQS, for the example: a message
// received is invisible for the visibility timeout, or for what the last
// ChangeMessageVisibilityBatch asked, then visible again to the next
// receive.
type tinySQS struct {
	visibility time.Duration

	mu   sync.Mutex
	msgs []*tinyMessage
}

type tinyMessage struct {
	body, handle string
	visibleAt    time.Time
	received     int
	deleted      bool
}

func newTinySQS(visibility time.Duration, bodies ...string) *tinySQS {
	s := &tinySQS{visibility: visibility}
	for _, b := range bodies {
		s.msgs = append(s.msgs, &tinyMessage{body: b})
	}
	return s
}

// ReceiveMessage returns the visible messages, each with a new receipt
// handle. It does not wait for messages.
func (s *tinySQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range s.msgs {
		if m.deleted || now.Before(m.visibleAt) || len(out.Messages) == int(in.MaxNumberOfMessages) {
			continue
		}
		m.received++
		m.handle = fmt.Sprintf("%s#%d", m.body, m.received)
		m.visibleAt = now.Add(s.visibility)
		out.Messages = append(out.Messages, types.Message{Body: aws.String(m.body), ReceiptHandle: aws.String(m.handle)})
	}
	return out, nil
}

// ChangeMessageVisibilityBatch is the call the Keeper makes. A handle that
// is not the latest of an invisible message is refused, as SQS does.
func (s *tinySQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		m := s.byHandle(*e.ReceiptHandle)
		if m == nil || !now.Before(m.visibleAt) {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{
				Id: e.Id, Code: aws.String("MessageNotInflight"), Message: aws.String("message not in flight"), SenderFault: true,
			})
			continue
		}
		m.visibleAt = now.Add(time.Duration(e.VisibilityTimeout) * time.Second)
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// DeleteMessage deletes the message of a handle. Stricter than SQS, it
// refuses a handle whose visibility ran out: another consumer may have
// received the message meanwhile.
func (s *tinySQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.byHandle(*in.ReceiptHandle)
	if m == nil || !time.Now().Before(m.visibleAt) {
		return nil, &types.ReceiptHandleIsInvalid{Message: aws.String("the visibility ran out before the delete")}
	}
	m.deleted = true
	return &sqs.DeleteMessageOutput{}, nil
}

// byHandle returns the undeleted message whose latest handle is h; s.mu is
// held.
func (s *tinySQS) byHandle(h string) *tinyMessage {
	for _, m := range s.msgs {
		if m.handle == h && !m.deleted {
			return m
		}
	}
	return nil
}

// receives returns how many times the message with body was received.
func (s *tinySQS) receives(body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if m.body == body {
			return m.received
		}
	}
	return 0
}
