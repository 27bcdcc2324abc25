package outboxtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/producer"
)

// Queue is a FIFO queue the relay scenarios publish to (the local stack's,
// or SQS).
type Queue struct {
	// Client sends to the queue.
	Client producer.SQSAPI
	// URL is the queue's URL.
	URL string
	// Receive returns n distinct messages from the queue, with their
	// message and system attributes, deleting them, or fails the test.
	Receive func(t *testing.T, n int) []sqstypes.Message
}

// RunRelays runs the scenarios that publish with [outbox.Relay]s to a real
// queue. newHarness returns a fresh store on the wall clock (Harness.Clock
// and Lease are not used); newQueue a fresh, empty FIFO queue.
func RunRelays(t *testing.T, newHarness func(t *testing.T) Harness, newQueue func(t *testing.T) Queue) {
	t.Run("RelaysKeepOrderAndParkFailures", func(t *testing.T) { relaysOrderAndPark(t, newHarness(t), newQueue(t)) })
}

// flaky fails every send of one entity's events.
type flaky struct {
	producer.SQSAPI
	entity string
	fails  atomic.Int64
}

func (f *flaky) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var keep []sqstypes.SendMessageBatchRequestEntry
	var failed []sqstypes.BatchResultErrorEntry
	for _, e := range in.Entries {
		if strings.Contains(aws.ToString(e.MessageBody), `"e":"`+f.entity+`"`) {
			f.fails.Add(1)
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
			continue
		}
		keep = append(keep, e)
	}
	out := &sqs.SendMessageBatchOutput{Failed: failed}
	if len(keep) > 0 {
		cp := *in
		cp.Entries = keep
		res, err := f.SQSAPI.SendMessageBatch(ctx, &cp, o...)
		if err != nil {
			return nil, err
		}
		out.Successful = res.Successful
		out.Failed = append(out.Failed, res.Failed...)
	}
	return out, nil
}

type counter struct {
	outbox.NopObserver
	mu              sync.Mutex
	published, dead int
}

func (c *counter) Published(evs []outbox.Event) { c.mu.Lock(); c.published += len(evs); c.mu.Unlock() }
func (c *counter) SendFailed(_ outbox.Event, _ error, dead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if dead {
		c.dead++
	}
}

// relaysOrderAndPark: two relays publish 300 events of 20 entities, written
// in several transactions: every event arrives, each entity's events in
// commit order in its own message group, while one entity whose sends
// always fail is parked without holding up the others.
func relaysOrderAndPark(t *testing.T, h Harness, q Queue) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const entities, perEntity = 20, 15
	for i := range perEntity {
		var evs []outbox.Event
		for e := range entities {
			evs = append(evs, outbox.Event{
				ID:      fmt.Sprintf("e%02d-%03d", e, i),
				Entity:  fmt.Sprintf("e%02d", e),
				Type:    "credit",
				Payload: fmt.Sprintf(`{"e":"e%02d","n":%d}`, e, i),
			})
		}
		// Several transactions, each with one event of every entity.
		for chunk := range 4 {
			commit(t, h, evs[chunk*5:chunk*5+5]...)
		}
	}
	client := &flaky{SQSAPI: q.Client, entity: "e07"}
	obs := &counter{}
	var wg sync.WaitGroup
	for i := range 2 {
		r, err := outbox.NewRelay(outbox.RelayConfig{
			Store: h.Store, Client: client, QueueURL: q.URL, Owner: fmt.Sprintf("relay-%d", i),
			PollInterval: 20 * time.Millisecond, MaxAttempts: 3, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
			Observer: obs,
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
	want := (entities - 1) * perEntity
	got := q.Receive(t, want)
	cancel()
	wg.Wait()

	last := map[string]int{}
	for _, m := range got {
		id := aws.ToString(m.MessageAttributes[producer.AttrID].StringValue)
		var e, n int
		if _, err := fmt.Sscanf(id, "e%02d-%03d", &e, &n); err != nil {
			t.Fatalf("message without its event id: %q", id)
		}
		group := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
		if group != fmt.Sprintf("e%02d", e) {
			t.Fatalf("event %s in group %q", id, group)
		}
		prev, ok := last[group]
		if !ok {
			prev = -1
		}
		if n != prev+1 {
			t.Fatalf("group %s: event %d after %d", group, n, prev)
		}
		last[group] = n
		if typ := aws.ToString(m.MessageAttributes[outbox.AttrType].StringValue); typ != "credit" {
			t.Fatalf("event type attribute %q", typ)
		}
	}
	if _, ok := last["e07"]; ok {
		t.Fatal("an event of the failing entity was published")
	}
	// Published events left the store: only e07's remain, the first parked.
	s, err := h.Store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Dead != 1 || s.DeadEvents[0].ID != "e07-000" || s.Pending != perEntity-1 {
		t.Fatalf("stats %+v: want e07-000 parked and the rest of e07 waiting behind it", s)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.published < want || obs.dead != 1 || client.fails.Load() != 3 {
		t.Fatalf("observer %+v, sends failed %d: want ≥ %d published, 1 dead after 3 failed sends", obs, client.fails.Load(), want)
	}
	if !strings.Contains(s.DeadEvents[0].LastError, "InternalError") {
		t.Fatalf("dead event's reason %q", s.DeadEvents[0].LastError)
	}
}
