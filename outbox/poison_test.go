package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/outbox"
)

// An event SQS can never take (over the queue's MaximumMessageSize, with
// characters SQS refuses, with a group id SQS refuses) is parked on its
// first failed send, not retried for MaxAttempts; the other entities flow
// meanwhile, and once an operator discards it, its entity's later events
// are published.
func TestRelayParksPoisonEventsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name, queue string
		attrs       map[string]string
		poison      outbox.Event
		badEntity   bool // the entity's later events are as bad
	}{
		{"over the queue's MaximumMessageSize", "small", map[string]string{"MaximumMessageSize": "1024"},
			outbox.Event{ID: "poison", Entity: "x", Payload: strings.Repeat("p", 2000)}, false},
		{"characters SQS refuses", "q", nil,
			outbox.Event{ID: "poison", Entity: "x", Payload: "a\x00b"}, false},
		{"group id too long", "q.fifo", nil,
			outbox.Event{ID: "poison", Entity: strings.Repeat("x", 129), Payload: "ok"}, true},
		{"group id with a space", "q.fifo", nil,
			outbox.Event{ID: "poison", Entity: "acct 1", Payload: "ok"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fake := sqsfake.New()
			url := fake.AddQueue(tc.queue, tc.attrs)
			store := outbox.NewMemory(outbox.MemoryConfig{})
			later := outbox.Event{ID: "later", Entity: tc.poison.Entity, Payload: "ok"}
			other := outbox.Event{ID: "other", Entity: "y", Payload: "ok"}
			if err := store.Put(ctx, tc.poison, later, other); err != nil {
				t.Fatal(err)
			}
			r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: fake, QueueURL: url})
			if err != nil {
				t.Fatal(err)
			}
			sentIDs := func() string {
				var ids []string
				for _, m := range fake.Sent(url) {
					ids = append(ids, *m.Attributes["sqsonce-id"].StringValue)
				}
				return fmt.Sprint(ids)
			}
			if _, err := r.Step(ctx); err != nil {
				t.Fatal(err)
			}
			s, err := store.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s.Dead != 1 || s.DeadEvents[0].ID != "poison" || s.DeadEvents[0].Attempts != 1 {
				t.Fatalf("after one step: dead=%d %+v, sent %s; want the poison event parked after 1 attempt", s.Dead, s.DeadEvents, sentIDs())
			}
			if got := sentIDs(); got != "[other]" {
				t.Fatalf("sent %s, want [other] (the poison event never reaches SQS, its entity waits)", got)
			}
			if err := store.Discard(ctx, "poison"); err != nil {
				t.Fatalf("Discard: %v", err)
			}
			for range 3 {
				if _, err := r.Step(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if tc.badEntity {
				// Its later event is refused as well, and parked at once.
				s, err := store.Stats(ctx)
				if err != nil || s.Dead != 1 || s.DeadEvents[0].ID != "later" || sentIDs() != "[other]" {
					t.Fatalf("after Discard(poison) and 3 steps: sent %s, stats %+v %v; want later parked", sentIDs(), s, err)
				}
				return
			}
			if got := sentIDs(); got != "[other later]" {
				t.Fatalf("after Discard(poison) and 3 steps: sent %s, want [other later]", got)
			}
		})
	}
}

// A parked event whose payload an operator edits is published in its
// place, before its entity's later events.
func TestRelayPublishesAnEditedEventInItsPlace(t *testing.T) {
	ctx := context.Background()
	fake := sqsfake.New()
	url := fake.AddQueue("q.fifo", nil)
	store := outbox.NewMemory(outbox.MemoryConfig{})
	if err := store.Put(ctx, outbox.Event{ID: "poison", Entity: "x", Payload: "a\x00b"}, outbox.Event{ID: "later", Entity: "x", Payload: "ok"}); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: fake, QueueURL: url})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Edit(ctx, "poison", "a b"); err != nil {
		t.Fatalf("Edit: %v", err)
	}
	for range 3 {
		if _, err := r.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, m := range fake.Sent(url) {
		got = append(got, *m.Attributes["sqsonce-id"].StringValue+"="+m.Body)
	}
	if fmt.Sprint(got) != "[poison=a b later=ok]" {
		t.Fatalf("sent %v, want [poison=a b later=ok]", got)
	}
}

// A queue whose attributes cannot be read: the relay takes no event, so
// none counts an attempt, and it publishes once the read works.
func TestRelayReadsTheQueueBeforeTakingEvents(t *testing.T) {
	ctx := context.Background()
	fake := sqsfake.New()
	url := fake.AddQueue("q", nil)
	store := outbox.NewMemory(outbox.MemoryConfig{})
	if err := store.Put(ctx, outbox.Event{ID: "a", Entity: "x", Payload: "ok"}); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: fake, QueueURL: url})
	if err != nil {
		t.Fatal(err)
	}
	fake.FailNext("GetQueueAttributes", 3, errors.New("connection reset"))
	for range 3 {
		if n, err := r.Step(ctx); err == nil || n != 0 {
			t.Fatalf("step with the queue unreadable: %d events, %v; want none and the error", n, err)
		}
	}
	evs, err := store.Due(ctx, "check", 10)
	if err != nil || len(evs) != 1 || evs[0].Attempts != 0 {
		t.Fatalf("the event after 3 failed reads: %+v %v, want pending with no attempt", evs, err)
	}
	if err := store.Release(ctx, "check"); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Step(ctx); n != 1 || err != nil || len(fake.Sent(url)) != 1 {
		t.Fatalf("once the read works: step %d %v, %d sent", n, err, len(fake.Sent(url)))
	}
}

// What SQS refuses as the sender's fault (by its error code), beyond what
// the producer checks, parks the event at once too: here the whole call
// is refused, and the relay's other events still go out.
func TestRelayParksWhatSQSRefuses(t *testing.T) {
	ctx := context.Background()
	fake := sqsfake.New()
	url := fake.AddQueue("q", nil)
	fake.Inject(func(op string, in any) sqsfake.Fault {
		if b, ok := in.(*sqs.SendMessageBatchInput); ok {
			for _, e := range b.Entries {
				if aws.ToString(e.MessageBody) == "refuse me" {
					return sqsfake.Fault{Err: &types.InvalidMessageContents{Message: aws.String("refused")}}
				}
			}
		}
		return sqsfake.Fault{}
	})
	store := outbox.NewMemory(outbox.MemoryConfig{})
	if err := store.Put(ctx, outbox.Event{ID: "poison", Entity: "x", Payload: "refuse me"}, outbox.Event{ID: "other", Entity: "y", Payload: "ok"}); err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: fake, QueueURL: url})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := store.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Dead != 1 || s.DeadEvents[0].ID != "poison" || len(fake.Sent(url)) != 1 {
		t.Fatalf("after one step: %d dead %+v, %d sent; want poison parked and other sent", s.Dead, s.DeadEvents, len(fake.Sent(url)))
	}
}
