package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/producer"
)

// A relay publishes committed events to a FIFO queue (here a stand-in for
// SQS that records what it is sent): the entity is the message group, the
// event id the deduplication id and the sqsonce-id attribute a consumer
// dedupes on. Run calls Step in a loop; a step takes each entity's ready
// run and sends it in waves, an entity's next event only after its
// previous one was accepted, so an entity's events leave in commit order.
func ExampleRelay() {
	ctx := context.Background()
	client := &sentSQS{} // an *sqs.Client in real code
	queueURL := "https://sqs.us-east-1.amazonaws.com/123456789012/credits.fifo"

	store := outbox.NewMemory(outbox.MemoryConfig{}) // outboxdynamo or outboxpg in real code
	_ = store.Put(ctx,
		outbox.Event{ID: "evt-a1", Entity: "acct-a", Type: "credited", Payload: `{"amount":5}`},
		outbox.Event{ID: "evt-b1", Entity: "acct-b", Type: "credited", Payload: `{"amount":1}`})
	_ = store.Put(ctx, outbox.Event{ID: "evt-a2", Entity: "acct-a", Type: "credited", Payload: `{"amount":7}`})

	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: client, QueueURL: queueURL})
	if err != nil {
		panic(err)
	}
	for {
		n, err := relay.Step(ctx)
		if err != nil {
			panic(err)
		}
		if n == 0 {
			break
		}
		fmt.Println("step published", n)
	}
	for _, m := range client.sent {
		fmt.Println(aws.ToString(m.MessageGroupId), aws.ToString(m.MessageDeduplicationId),
			aws.ToString(m.MessageAttributes[producer.AttrID].StringValue),
			aws.ToString(m.MessageAttributes[outbox.AttrType].StringValue), aws.ToString(m.MessageBody))
	}
	s, _ := store.Stats(ctx)
	fmt.Println("pending:", s.Pending)
	// Output:
	// step published 3
	// acct-a evt-a1 evt-a1 credited {"amount":5}
	// acct-b evt-b1 evt-b1 credited {"amount":1}
	// acct-a evt-a2 evt-a2 credited {"amount":7}
	// pending: 0
}

// sentSQS stands in for SQS, for the example: it takes every message of a
// batch and keeps it, in the order sent. It implements producer.SQSAPI,
// the two calls a relay makes.
type sentSQS struct {
	mu   sync.Mutex
	sent []types.SendMessageBatchRequestEntry
}

// SendMessageBatch accepts every entry.
func (s *sentSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		s.sent = append(s.sent, e)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{
			Id: e.Id, MessageId: aws.String("m-" + strconv.Itoa(len(s.sent))),
		})
	}
	return out, nil
}

// GetQueueAttributes reports SQS's largest message size, which the relay
// reads once before its first step publishes.
func (s *sentSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		string(types.QueueAttributeNameMaximumMessageSize): "1048576",
	}}, nil
}
