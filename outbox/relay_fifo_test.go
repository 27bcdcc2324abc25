package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/producer"
)

// ExampleRelay's scenario on the full SQS fake, which checks the FIFO
// parameters SQS checks: the relay takes both entities' runs in one step
// and sends them in waves, so an entity's events reach the queue in commit
// order, each
// with the entity as its message group, the event id as its deduplication
// id and sqsonce-id, and its type as an attribute; then nothing is
// pending.
func TestRelayPublishesToFIFOInCommitOrder(t *testing.T) {
	ctx := context.Background()
	fake := sqsfake.New()
	queueURL := fake.AddQueue("credits.fifo", nil)
	store := outbox.NewMemory(outbox.MemoryConfig{})
	if err := store.Put(ctx,
		outbox.Event{ID: "evt-a1", Entity: "acct-a", Type: "credited", Payload: `{"amount":5}`},
		outbox.Event{ID: "evt-b1", Entity: "acct-b", Type: "credited", Payload: `{"amount":1}`}); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, outbox.Event{ID: "evt-a2", Entity: "acct-a", Type: "credited", Payload: `{"amount":7}`}); err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: fake, QueueURL: queueURL})
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for {
		n, err := relay.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		steps = append(steps, n)
	}
	if !slices.Equal(steps, []int{3}) {
		t.Errorf("steps published %v, want [3]", steps)
	}
	var got []string
	for _, m := range fake.Messages(queueURL) {
		got = append(got, fmt.Sprintln(m.GroupID, m.DeduplicationID, aws.ToString(m.Attributes[producer.AttrID].StringValue),
			aws.ToString(m.Attributes[outbox.AttrType].StringValue), m.Body))
	}
	want := []string{
		"acct-a evt-a1 evt-a1 credited {\"amount\":5}\n",
		"acct-b evt-b1 evt-b1 credited {\"amount\":1}\n",
		"acct-a evt-a2 evt-a2 credited {\"amount\":7}\n",
	}
	if !slices.Equal(got, want) {
		t.Errorf("queue holds\n%s\nwant\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
	s, err := store.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pending != 0 {
		t.Errorf("%d events pending, want 0", s.Pending)
	}
	if p := fake.Problems(); len(p) > 0 {
		t.Errorf("calls SQS would refuse: %v", p)
	}
}
