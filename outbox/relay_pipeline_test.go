package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/outbox"
)

// signalStore is a Memory store that tells when DueRuns and Published are
// called.
type signalStore struct {
	*outbox.Memory
	reads, removes chan []outbox.Event
}

func (s signalStore) DueRuns(ctx context.Context, owner string, limit int, inFlight []outbox.Event) ([]outbox.Event, error) {
	s.reads <- inFlight
	return s.Memory.DueRuns(ctx, owner, limit, inFlight)
}

func (s signalStore) Published(ctx context.Context, evs []outbox.Event) error {
	s.removes <- evs
	return s.Memory.Published(ctx, evs)
}

// overlapSQS accepts every entry; during each call it waits for the work
// the relay should be doing at the same time (until an hour passes).
type overlapSQS struct {
	during func(call int) bool
	mu     sync.Mutex
	calls  int
	ok     []bool // per call: the work happened during it
	bodies [][]string
}

func (o *overlapSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	o.mu.Lock()
	o.calls++
	call := o.calls
	o.mu.Unlock()
	ok := o.during(call)
	out := &sqs.SendMessageBatchOutput{}
	var bodies []string
	for _, e := range in.Entries {
		bodies = append(bodies, aws.ToString(e.MessageBody))
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id})
	}
	o.mu.Lock()
	o.ok = append(o.ok, ok)
	o.bodies = append(o.bodies, bodies)
	o.mu.Unlock()
	return out, nil
}

func (o *overlapSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "1048576"}}, nil
}

// With a RunStore, Run reads the next batch while the current one is sent
// (the read names the events in flight, so their entities' runs start
// after them), and removes a batch's published events while the next one
// is sent: the store's round trips overlap SQS's instead of adding to
// them. Every event is published once, in commit order per entity.
func TestRelayRunReadsAndRemovesWhileSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mem := outbox.NewMemory(outbox.MemoryConfig{})
		for _, id := range []string{"a1", "b1", "c1", "d1", "a2"} {
			if err := mem.Put(ctx, outbox.Event{ID: id, Entity: id[:1], Payload: id}); err != nil {
				t.Fatal(err)
			}
		}
		st := signalStore{Memory: mem, reads: make(chan []outbox.Event, 100), removes: make(chan []outbox.Event, 100)}
		var inFlight [][]outbox.Event
		var removed [][]outbox.Event
		client := &overlapSQS{during: func(call int) bool {
			// Call 1 sends the first batch: the second read must start
			// during it. Call 2 (the first batch's second wave) and
			// later: the first batch's removal, during the next batch.
			timeout := time.After(time.Hour)
			for {
				select {
				case f := <-st.reads:
					inFlight = append(inFlight, f)
					if call == 1 && len(inFlight) == 2 {
						return true
					}
				case evs := <-st.removes:
					removed = append(removed, evs)
					if call > 1 {
						return true
					}
				case <-timeout:
					return false
				}
			}
		}}
		done := make(chan struct{})
		obs := &doneAfter{n: 5, done: done}
		relay, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: client, QueueURL: "https://sqs.example/q", BatchSize: 4, Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = relay.Run(ctx) })
		<-done
		cancel()
		wg.Wait()
		client.mu.Lock()
		defer client.mu.Unlock()
		if len(client.ok) < 2 || !client.ok[0] {
			t.Fatalf("the second read did not start while the first batch was sent (calls %q, reads naming in flight %v)", client.bodies, inFlight)
		}
		if !client.ok[1] {
			t.Fatalf("the first batch's published events were not removed while the next batch was sent (calls %q)", client.bodies)
		}
		// Batch 1 (BatchSize 4 over 4 entities, one each): a1 b1 c1 d1;
		// a2 comes from the read made while it was sent, after a1.
		want := "[[a1 b1 c1 d1] [a2]]"
		if got := fmtCalls(client.bodies); got != want {
			t.Fatalf("calls %s, want %s", got, want)
		}
		if len(inFlight) < 2 || len(inFlight[1]) != 4 {
			t.Fatalf("the read made during the first batch named %v in flight, want its 4 events", inFlight)
		}
	})
}

func fmtCalls(calls [][]string) string {
	s := "["
	for i, c := range calls {
		if i > 0 {
			s += " "
		}
		s += "["
		for j, b := range c {
			if j > 0 {
				s += " "
			}
			s += b
		}
		s += "]"
	}
	return s + "]"
}

// doneAfter closes done once n events were published.
type doneAfter struct {
	outbox.NopObserver
	n    int
	done chan struct{}
	mu   sync.Mutex
	seen int
}

func (d *doneAfter) Published(evs []outbox.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen += len(evs)
	if d.seen >= d.n && d.done != nil {
		close(d.done)
		d.done = nil
	}
}

// gatedRemovals is a Memory store whose first Published call returns only
// once open is closed (or an hour passes).
type gatedRemovals struct {
	*outbox.Memory
	open     chan struct{}
	mu       sync.Mutex
	first    bool // the first Published call was made
	returned bool // and returned
}

func (g *gatedRemovals) Published(ctx context.Context, evs []outbox.Event) error {
	g.mu.Lock()
	first := !g.first
	g.first = true
	g.mu.Unlock()
	if first {
		select {
		case <-g.open:
		case <-time.After(time.Hour):
		}
		defer func() {
			g.mu.Lock()
			g.returned = true
			g.mu.Unlock()
		}()
	}
	return g.Memory.Published(ctx, evs)
}

// gatedSQS accepts every entry; at the send of body at it notes whether
// the store's first removal had not yet returned, then opens its gate.
type gatedSQS struct {
	overlapSQS
	store  *gatedRemovals
	at     string
	during bool // the send of at began while the first removal was going on
	seen   bool
}

func (g *gatedSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for _, e := range in.Entries {
		if aws.ToString(e.MessageBody) == g.at {
			g.store.mu.Lock()
			// Going on: started by the relay and not returned. Its
			// goroutine may not have reached Published yet.
			g.during, g.seen = !g.store.returned, true
			g.store.mu.Unlock()
			close(g.store.open)
		}
	}
	return g.overlapSQS.SendMessageBatch(ctx, in, opts...)
}

// A slow removal does not hold up the sends: the step after the one it
// overlapped sends while it goes on (its read names the events being
// removed as in flight), so a step costs its sends, not its sends plus
// what of the store's removal they did not cover. One entity, batches of
// 2: batch 1 (a1 a2) is removed while batch 2 (a3 a4) is sent, and batch
// 3 (a5 a6) is sent while that removal still goes on. Every event is
// published once, in commit order.
func TestRelayRunSendsWhileTheLastRemovalGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mem := outbox.NewMemory(outbox.MemoryConfig{})
		var ids []string
		for i := 1; i <= 8; i++ {
			id := fmt.Sprintf("a%d", i)
			ids = append(ids, id)
			if err := mem.Put(ctx, outbox.Event{ID: id, Entity: "a", Payload: id}); err != nil {
				t.Fatal(err)
			}
		}
		st := &gatedRemovals{Memory: mem, open: make(chan struct{})}
		client := &gatedSQS{overlapSQS: overlapSQS{during: func(int) bool { return true }}, store: st, at: "a5"}
		done := make(chan struct{})
		obs := &doneAfter{n: 8, done: done}
		relay, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: client, QueueURL: "https://sqs.example/q", BatchSize: 2, Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = relay.Run(ctx) })
		<-done
		cancel()
		wg.Wait()
		if !client.seen || !client.during {
			t.Fatalf("a5 (batch 3) was sent only after batch 1's removal returned, want while it goes on (calls %s)", fmtCalls(client.bodies))
		}
		var sent []string
		for _, c := range client.bodies {
			sent = append(sent, c...)
		}
		if got, want := fmt.Sprint(sent), fmt.Sprint(ids); got != want {
			t.Fatalf("sent %s, want each event once in commit order: %s", got, want)
		}
		if s, err := mem.Stats(context.Background()); err != nil || s.Pending != 0 {
			t.Fatalf("after Run: %d events pending (%v), want none", s.Pending, err)
		}
	})
}

// slowStats is a Memory store whose first Stats returns only once open is
// closed (or an hour passes), and which notes whether an event was read
// meanwhile.
type slowStats struct {
	*outbox.Memory
	open  chan struct{}
	mu    sync.Mutex
	first bool // Stats was called
	back  bool // and returned
	read  bool // DueRuns was called before it returned
}

func (s *slowStats) Stats(ctx context.Context) (outbox.Stats, error) {
	s.mu.Lock()
	first := !s.first
	s.first = true
	s.mu.Unlock()
	if first {
		select {
		case <-s.open:
		case <-time.After(time.Hour):
		}
		defer func() {
			s.mu.Lock()
			s.back = true
			s.mu.Unlock()
		}()
	}
	return s.Memory.Stats(ctx)
}

func (s *slowStats) DueRuns(ctx context.Context, owner string, limit int, inFlight []outbox.Event) ([]outbox.Event, error) {
	s.mu.Lock()
	// Going on: Run started it and it did not return. Its goroutine may
	// not have reached Stats yet.
	if !s.back && !s.read {
		s.read = true
		close(s.open)
	}
	s.mu.Unlock()
	return s.Memory.DueRuns(ctx, owner, limit, inFlight)
}

// statsSeen is an Observer that keeps what Stats told it.
type statsSeen struct {
	doneAfter
	told []outbox.Stats
}

func (o *statsSeen) Stats(s outbox.Stats, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.told = append(o.told, s)
}

// The Stats read (the whole outbox, for some stores) goes on beside the
// relay's first step rather than before it: a relay started on a backlog
// starts sending without waiting for it. The Observer is still told.
func TestRelayRunDoesNotWaitForStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mem := outbox.NewMemory(outbox.MemoryConfig{})
		for _, id := range []string{"a1", "a2", "b1"} {
			if err := mem.Put(ctx, outbox.Event{ID: id, Entity: id[:1], Payload: id}); err != nil {
				t.Fatal(err)
			}
		}
		st := &slowStats{Memory: mem, open: make(chan struct{})}
		done := make(chan struct{})
		obs := &statsSeen{doneAfter: doneAfter{n: 3, done: done}}
		client := &overlapSQS{during: func(int) bool { return true }}
		relay, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: client, QueueURL: "https://sqs.example/q", Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = relay.Run(ctx) })
		<-done
		synctest.Wait()
		cancel()
		wg.Wait()
		if !st.read {
			t.Fatalf("the relay read its first batch only after Stats returned, want while Stats goes on")
		}
		if len(obs.told) == 0 {
			t.Fatalf("the Observer was told no Stats")
		}
	})
}
