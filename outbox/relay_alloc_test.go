package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/outbox"
)

// acceptAll is an SQS client that accepts every entry of every batch.
type acceptAll struct{}

func (acceptAll) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{Successful: make([]types.SendMessageBatchResultEntry, len(in.Entries))}
	for i, e := range in.Entries {
		out.Successful[i] = types.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id}
	}
	return out, nil
}

func (acceptAll) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "262144", "MessageRetentionPeriod": "345600"}}, nil
}

var _ = aws.String

// allocEvents is a batch of n events, one per entity, as the bench writes.
func allocEvents(n int) []outbox.Event {
	evs := make([]outbox.Event, n)
	for i := range evs {
		evs[i] = outbox.Event{ID: fmt.Sprintf("ev-%d", i), Entity: "a" + strconv.Itoa(i), Type: "account.credited",
			Payload: fmt.Sprintf(`{"id":"ev-%d","account":"a%d","amount":1}`, i, i)}
	}
	return evs
}

func BenchmarkRelayStepMemory(b *testing.B) {
	ctx := context.Background()
	store := outbox.NewMemory(outbox.MemoryConfig{})
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: acceptAll{}, QueueURL: "https://sqs.example/1/q"})
	if err != nil {
		b.Fatal(err)
	}
	evs := allocEvents(100)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := store.Put(ctx, evs...); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if n, err := r.Step(ctx); err != nil || n != len(evs) {
			b.Fatal(n, err)
		}
	}
}
