package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/outbox"
)

// callsSQS records the bodies of each SendMessageBatch call and fails the
// entries whose body contains "bad" while failing is set.
type callsSQS struct {
	mu      sync.Mutex
	failing bool
	calls   [][]string
}

func (c *callsSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	var call []string
	for _, e := range in.Entries {
		body := aws.ToString(e.MessageBody)
		if c.failing && strings.Contains(body, "bad") {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
			call = append(call, body+"(failed)")
			continue
		}
		call = append(call, body)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id})
	}
	c.calls = append(c.calls, call)
	return out, nil
}

func (c *callsSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "1048576"}}, nil
}

func (c *callsSQS) take() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

// A step takes each entity's whole ready run and sends it in waves, one
// event of an entity per call and the next only after it was accepted:
// an entity whose event failed sends nothing more in the step, while the
// other entity's run goes on; after the retry time the failed event goes
// out before its entity's later one.
func TestRelayStepSendsRunsInWaves(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_900_000_000, 0)
	clock := func() time.Time { return now }
	store := outbox.NewMemory(outbox.MemoryConfig{NowFunc: clock})
	for _, body := range []string{"a1", "b1", "a2 bad", "b2", "a3", "b3"} {
		if err := store.Put(ctx, outbox.Event{ID: strings.Fields(body)[0], Entity: body[:1], Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	client := &callsSQS{failing: true}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: client, QueueURL: "https://sqs.example/q", NowFunc: clock})
	if err != nil {
		t.Fatal(err)
	}
	n, err := relay.Step(ctx)
	if err != nil || n != 6 {
		t.Fatalf("first step took %d events (%v), want all 6 in one step", n, err)
	}
	want := [][]string{{"a1", "b1"}, {"a2 bad(failed)", "b2"}, {"b3"}}
	if got := client.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first step's calls %q, want %q (a3 must wait behind a2)", got, want)
	}
	if s, _ := store.Stats(ctx); s.Pending != 2 {
		t.Fatalf("%d pending after the first step, want 2 (a2 waiting for its retry, a3 behind it)", s.Pending)
	}
	// Waiting for its retry: a2 holds back a3.
	if n, err := relay.Step(ctx); n != 0 || err != nil {
		t.Fatalf("a step before the retry time took %d (%v), want 0", n, err)
	}
	now = now.Add(time.Hour)
	client.failing = false
	if n, err := relay.Step(ctx); n != 2 || err != nil {
		t.Fatalf("the retry step took %d (%v), want 2", n, err)
	}
	want = [][]string{{"a2 bad"}, {"a3"}}
	if got := client.take(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("retry step's calls %q, want %q", got, want)
	}
	if s, _ := store.Stats(ctx); s.Pending != 0 {
		t.Fatalf("%d pending, want 0", s.Pending)
	}
}
