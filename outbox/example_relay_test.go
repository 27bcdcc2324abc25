package outbox_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/producer"
)

// A relay publishes committed events to a FIFO queue (here the in-process
// SQS fake): the entity is the message group, the event id the
// deduplication id and the sqsonce-id attribute a consumer dedupes on.
// Run calls Step in a loop; each step takes at most one event per entity,
// so an entity's events leave in commit order.
func ExampleRelay() {
	ctx := context.Background()
	sqs := sqsfake.New()
	queueURL := sqs.AddQueue("credits.fifo", nil)

	store := outbox.NewMemory(outbox.MemoryConfig{})
	_ = store.Put(ctx,
		outbox.Event{ID: "evt-a1", Entity: "acct-a", Type: "credited", Payload: `{"amount":5}`},
		outbox.Event{ID: "evt-b1", Entity: "acct-b", Type: "credited", Payload: `{"amount":1}`})
	_ = store.Put(ctx, outbox.Event{ID: "evt-a2", Entity: "acct-a", Type: "credited", Payload: `{"amount":7}`})

	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: sqs, QueueURL: queueURL})
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
	for _, m := range sqs.Messages(queueURL) {
		fmt.Println(m.GroupID, m.DeduplicationID, aws.ToString(m.Attributes[producer.AttrID].StringValue),
			aws.ToString(m.Attributes[outbox.AttrType].StringValue), m.Body)
	}
	s, _ := store.Stats(ctx)
	fmt.Println("pending:", s.Pending)
	// Output:
	// step published 2
	// step published 1
	// acct-a evt-a1 evt-a1 credited {"amount":5}
	// acct-b evt-b1 evt-b1 credited {"amount":1}
	// acct-a evt-a2 evt-a2 credited {"amount":7}
	// pending: 0
}
