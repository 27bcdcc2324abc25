package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

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

// TestRelayStepAllocations pins what a relay step costs in allocations per
// event sent: a batch of 100 events of 100 entities, committed to the
// memory store and sent by one Step through a client that accepts every
// entry. The relay builds one attribute map per event, which the producer
// sends as it is (with sqsonce-id already in it), and the producer's calls
// point into one string slice per call.
func TestRelayStepAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	ctx := context.Background()
	store := outbox.NewMemory(outbox.MemoryConfig{})
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: acceptAll{}, QueueURL: "https://sqs.example/1/q"})
	if err != nil {
		t.Fatal(err)
	}
	evs := allocEvents(100)
	step := func() {
		if err := store.Put(ctx, evs...); err != nil {
			t.Fatal(err)
		}
		if n, err := r.Step(ctx); err != nil || n != len(evs) {
			t.Fatalf("Step took %d events (%v), want %d", n, err, len(evs))
		}
	}
	step() // the queue's size is read once, and the store's maps grow
	perEvent := testing.AllocsPerRun(20, step) / float64(len(evs))
	t.Logf("%.2f allocations per event (Put and Step)", perEvent)
	if perEvent > 6.5 {
		t.Errorf("a relay step allocates %.2f times per event sent (Put included), want at most 6.5", perEvent)
	}
}
