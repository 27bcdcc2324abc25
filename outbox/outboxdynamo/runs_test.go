package outboxdynamo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
	"github.com/sqsonce/sqsonce/producer"
)

// Relays, each with its own Store as in separate processes, publish a few
// entities' long runs to a FIFO queue while more events are committed; a
// second relay joins, takes partitions whose runs the first had read
// ahead, publishes from them and stops, and the first takes them back
// (batches of one event per entity keep the first relay busy until the
// second joins):
// every event is published once (what the first had kept of those
// partitions is not sent again) and arrives in commit order in its
// entity's message group.
func TestRelaysKeepLongRunsInOrder(t *testing.T) {
	_, mk := newTable(t)
	q := localQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// e0…e5 hash to partitions 0, 3, 6, 9, 12 and 15: the second relay's
	// share (8…15) holds three of them.
	const entities, first, second, perTx = 6, 150, 50, 10
	writer := mk(outboxdynamo.Config{})
	// commit commits events [from, to) of every entity, each entity's in
	// order, perTx a transaction.
	commit := func(from, to int) {
		t.Helper()
		g, gctx := errgroup.WithContext(ctx)
		for e := range entities {
			g.Go(func() error {
				for k := from; k < to; k += perTx {
					var evs []outbox.Event
					for i := k; i < min(k+perTx, to); i++ {
						evs = append(evs, outbox.Event{ID: fmt.Sprintf("e%d-%03d", e, i), Entity: fmt.Sprintf("e%d", e), Payload: fmt.Sprintf(`{"n":%d}`, i)})
					}
					if err := writer.Commit(gctx, func() ([]types.TransactWriteItem, error) { return writer.Put(evs...) }); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	commit(0, first)

	obs := &publishLog{counts: map[string]int{}, by: map[string]int{}, second: make(chan struct{})}
	joined := obs.second
	// start runs a relay until ctx ends; done is closed once it returned
	// (and released its partitions).
	start := func(ctx context.Context, owner string) (done chan struct{}) {
		st := mk(outboxdynamo.Config{Lease: 1500 * time.Millisecond})
		var client producer.SQSAPI = q.Client
		if owner == "relay-0" {
			// Until the second relay has published, the first sends
			// slowly, so that it still has runs read ahead when the
			// second takes partitions, however fast the machine.
			client = slowUntil{SQSAPI: q.Client, until: joined}
		}
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: client, QueueURL: q.URL, Owner: owner,
			PollInterval: 20 * time.Millisecond, Observer: obs.as(owner), BatchSize: entities})
		if err != nil {
			t.Fatal(err)
		}
		done = make(chan struct{})
		go func() {
			defer close(done)
			_ = r.Run(ctx)
		}()
		return done
	}
	done0 := start(ctx, "relay-0")
	defer func() { cancel(); <-done0 }()
	got := q.Receive(t, 30)
	ctx1, stop1 := context.WithCancel(ctx)
	done1 := start(ctx1, "relay-1")
	select {
	case <-joined:
	case <-time.After(time.Minute):
		stop1()
		<-done1
		t.Fatal("the second relay published nothing in a minute")
	}
	stop1()
	<-done1
	commit(first, first+second)
	got = append(got, q.Receive(t, entities*(first+second)-30)...)
	cancel()
	<-done0

	obs.mu.Lock()
	for id, n := range obs.counts {
		if n != 1 {
			t.Errorf("event %s published %d times", id, n)
		}
	}
	t.Logf("published by relay: %v", obs.by)
	obs.mu.Unlock()
	last := map[string]int{}
	for _, m := range got {
		id := aws.ToString(m.MessageAttributes[producer.AttrID].StringValue)
		var e, n int
		if _, err := fmt.Sscanf(id, "e%d-%03d", &e, &n); err != nil {
			t.Fatalf("message without its event id: %q", id)
		}
		group := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
		if group != fmt.Sprintf("e%d", e) {
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
	}
	for e := range entities {
		if n := last[fmt.Sprintf("e%d", e)]; n != first+second-1 {
			t.Fatalf("entity e%d: last event %d, want %d", e, n, first+second-1)
		}
	}
	s, err := writer.Stats(context.Background())
	if err != nil || s.Pending != 0 || s.Dead != 0 {
		t.Fatalf("stats %+v %v: want nothing left", s, err)
	}
}

// publishLog counts each event's publishes, and each relay's; second is
// closed once relay-1 published 10 events.
// slowUntil waits 20 ms before each send until until is closed.
type slowUntil struct {
	producer.SQSAPI
	until <-chan struct{}
}

func (c slowUntil) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	select {
	case <-c.until:
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
	}
	return c.SQSAPI.SendMessageBatch(ctx, in, optFns...)
}

type publishLog struct {
	mu     sync.Mutex
	counts map[string]int
	by     map[string]int
	second chan struct{}
}

type relayLog struct {
	outbox.NopObserver
	l     *publishLog
	owner string
}

func (l *publishLog) as(owner string) outbox.Observer { return relayLog{l: l, owner: owner} }

func (r relayLog) Published(evs []outbox.Event) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	for _, e := range evs {
		r.l.counts[e.ID]++
	}
	r.l.by[r.owner] += len(evs)
	if r.owner == "relay-1" && r.l.by[r.owner] >= 10 && r.l.second != nil {
		close(r.l.second)
		r.l.second = nil
	}
}
