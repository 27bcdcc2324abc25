package outboxdynamo_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap/zaptest"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
	"github.com/sqsonce/sqsonce/producer"
)

// A relay reads each event about once: draining a backlog step by step as
// a relay does (Due, or DueRuns, then Published), the Queries of the
// event partitions read at most 1.1 items per event published, as the
// textbook loop (Query a page, send it, delete it) reads 1. Before, every
// step queried every held partition and re-read the events queued behind
// each entity's oldest: about 5.5 items per event. Each entity's events
// still come out in commit order: one per step from Due, its ready run in
// order from DueRuns.
func TestRelayReadsEachEventAboutOnce(t *testing.T) {
	for _, tc := range []struct {
		name                string
		entities, perEntity int
		limit               int
		runs                bool
	}{
		{"100 entities of 10 events", 100, 10, 100, false},
		{"4 entities of 150 events", 4, 150, 100, false},
		{"2000 entities of 1 event, 10 a step", 2000, 1, 10, false},
		{"runs: 100 entities of 10 events", 100, 10, 100, true},
		{"runs: 4 entities of 150 events", 4, 150, 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, mk := newTable(t)
			rc := &readCounter{DynamoDBAPI: testenv.Dynamo(t)}
			st := mk(outboxdynamo.Config{Client: rc})
			backlog(t, st, "ent", tc.entities, tc.perEntity)
			rc.take()
			ctx := context.Background()
			next := map[string]int{} // entity → its next event's number
			published, steps := 0, 0
			due := st.Due
			if tc.runs {
				due = func(ctx context.Context, owner string, limit int) ([]outbox.Event, error) {
					return st.DueRuns(ctx, owner, limit, nil)
				}
			}
			for ; steps < 2*tc.perEntity+2*tc.entities*tc.perEntity/tc.limit+10; steps++ {
				evs, err := due(ctx, "r1", tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) == 0 {
					break
				}
				seen := map[string]bool{}
				for _, e := range evs {
					if seen[e.Entity] && !tc.runs {
						t.Fatalf("step %d: two events of %s at once", steps, e.Entity)
					}
					seen[e.Entity] = true
					if want := fmt.Sprintf("%s-%d", e.Entity, next[e.Entity]); e.ID != want {
						t.Fatalf("step %d: %s, want %s (commit order)", steps, e.ID, want)
					}
					next[e.Entity]++
				}
				if err := st.Published(ctx, evs); err != nil {
					t.Fatal(err)
				}
				published += len(evs)
			}
			queries, items := rc.take()
			perEvent := float64(items) / float64(max(published, 1))
			t.Logf("%d events published in %d steps: %d queries of event partitions, %d items read, %.2f per event",
				published, steps, queries, items, perEvent)
			if published != tc.entities*tc.perEntity {
				t.Fatalf("published %d of %d events", published, tc.entities*tc.perEntity)
			}
			if perEvent > 1.1 {
				t.Fatalf("read %d items in %d queries for %d events published: %.2f per event, want at most 1.1",
					items, queries, published, perEvent)
			}
		})
	}
}

// DueRuns ranks events by their place in their run across partitions: a
// batch over one long run and many single events holds every entity's
// oldest event, the long run's next ones filling the rest in order.
func TestDueRunsRanksByPlace(t *testing.T) {
	_, mk := newTable(t)
	st := mk(outboxdynamo.Config{})
	ctx := context.Background()
	long := backlog(t, st, "long", 1, 300)[0]
	singles := backlog(t, st, "one", 50, 1)
	evs, err := st.DueRuns(ctx, "r1", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	next, count := map[string]int{}, map[string]int{}
	for _, e := range evs {
		if want := fmt.Sprintf("%s-%d", e.Entity, next[e.Entity]); e.ID != want {
			t.Fatalf("%s, want %s (commit order)", e.ID, want)
		}
		next[e.Entity]++
		count[e.Entity]++
	}
	for _, s := range singles {
		if count[s] != 1 {
			t.Fatalf("DueRuns(100) holds %d events of %s, want its one (counts %v)", count[s], s, count)
		}
	}
	if len(evs) != 100 || count[long] != 50 {
		t.Fatalf("DueRuns(100): %d events, %d of the long run; want 100 and 50", len(evs), count[long])
	}
}

// DueRuns passes over the events in flight (taken, still being sent): an
// entity's run starts after its last one of them, and a failed send holds
// back its entity again, without reading anything again.
func TestDueRunsAfterInFlight(t *testing.T) {
	_, mk := newTable(t)
	rc := &readCounter{DynamoDBAPI: testenv.Dynamo(t)}
	st := mk(outboxdynamo.Config{Client: rc})
	ctx := context.Background()
	backlog(t, st, "a", 1, 5)
	backlog(t, st, "b", 1, 3)
	ids := func(evs []outbox.Event) string {
		var s []string
		for _, e := range evs {
			s = append(s, e.ID)
		}
		return strings.Join(s, " ")
	}
	byID := map[string]outbox.Event{}
	all, err := st.DueRuns(ctx, "r1", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		byID[e.ID] = e
	}
	if got, want := ids(all), "a0000-0 b0000-0 a0000-1 b0000-1 a0000-2 b0000-2 a0000-3 a0000-4"; got != want {
		t.Fatalf("DueRuns: %s, want %s", got, want)
	}
	rc.take()
	flying := []outbox.Event{byID["a0000-0"], byID["a0000-1"], byID["b0000-0"]}
	evs, err := st.DueRuns(ctx, "r1", 100, flying)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(evs), "a0000-2 b0000-1 a0000-3 b0000-2 a0000-4"; got != want {
		t.Fatalf("DueRuns with %s in flight: %s, want %s", ids(flying), got, want)
	}
	if err := st.Published(ctx, flying[:2]); err != nil {
		t.Fatal(err)
	}
	failed := byID["b0000-0"]
	failed.Attempts = 1
	if err := st.Failed(ctx, failed, "throttled", time.Now().Add(time.Hour), false); err != nil {
		t.Fatal(err)
	}
	evs, err = st.DueRuns(ctx, "r1", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(evs), "a0000-2 a0000-3 a0000-4"; got != want {
		t.Fatalf("after a0000-0 and a0000-1 published and b0000-0 failed: %s, want %s", got, want)
	}
	if _, items := rc.take(); items != 0 {
		t.Fatalf("read %d items again", items)
	}
}

// Relay.Run reads the next batch while it sends one, naming the events in
// flight. When those are the last an entity's run kept, the read reads
// the run on, so that the next batch is full: before, it waited for them
// to be published and the batch read meanwhile had nothing of the entity
// (4 entities of long runs: about one read in 8 came back empty, and the
// relay read and sent a step at a time). Each event is still read once.
func TestDueRunsReadsOnARunWhileItsKeptEventsAreInFlight(t *testing.T) {
	_, mk := newTable(t)
	rc := &readCounter{DynamoDBAPI: testenv.Dynamo(t)}
	st := mk(outboxdynamo.Config{Client: rc})
	const entities, perEntity, limit = 4, 500, 100
	backlog(t, st, "run", entities, perEntity)
	rc.take()
	ctx := context.Background()
	next := map[string]int{}
	var flying []outbox.Event
	published, short := 0, 0
	for step := 0; published < entities*perEntity && step < 2*entities*perEntity/limit+10; step++ {
		// As Run does: the last batch is published, then the one after
		// the batch in flight is read.
		evs, err := st.DueRuns(ctx, "r1", limit, flying)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if want := fmt.Sprintf("%s-%d", e.Entity, next[e.Entity]); e.ID != want {
				t.Fatalf("step %d: %s, want %s (commit order)", step, e.ID, want)
			}
			next[e.Entity]++
		}
		if err := st.Published(ctx, flying); err != nil {
			t.Fatal(err)
		}
		published += len(flying)
		if len(evs) < limit && published+len(evs) < entities*perEntity {
			short++
			t.Logf("step %d: %d events read while %d were in flight", step, len(evs), len(flying))
		}
		flying = evs
	}
	if err := st.Published(ctx, flying); err != nil {
		t.Fatal(err)
	}
	published += len(flying)
	if published != entities*perEntity {
		t.Fatalf("published %d of %d events", published, entities*perEntity)
	}
	if short > 0 {
		t.Errorf("%d reads came back short of a full batch with more events due", short)
	}
	if _, items := rc.take(); float64(items) > 1.1*float64(published) {
		t.Errorf("read %d items for %d events", items, published)
	}
}

// heldQueries holds the answer of a Query made while armed until release
// is closed, after telling answered.
type heldQueries struct {
	outboxdynamo.DynamoDBAPI
	mu       sync.Mutex
	armed    bool
	answered chan struct{}
	release  chan struct{}
}

func (h *heldQueries) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := h.DynamoDBAPI.Query(ctx, in, opts...)
	h.mu.Lock()
	armed := h.armed
	h.armed = false
	h.mu.Unlock()
	if armed {
		close(h.answered)
		<-h.release
	}
	return out, err
}

// A relay removes a batch while it reads the next (the removal may go on
// into the next batch's sends). A read of a partition that DynamoDB
// answered before events of that partition were removed is still kept,
// without the removed ones: before, any removal in the partition made
// the Store drop the read and query again, so a relay whose removals
// overlap its reads read its events twice. One entity of 400 events in
// batches of 100: the third batch's read (a run read on) is answered
// before the first batch's removal and comes back after it.
func TestReadAnsweredBeforeARemovalIsKept(t *testing.T) {
	_, mk := newTable(t)
	rc := &readCounter{DynamoDBAPI: testenv.Dynamo(t)}
	held := &heldQueries{DynamoDBAPI: rc, answered: make(chan struct{}), release: make(chan struct{})}
	st := mk(outboxdynamo.Config{Client: held})
	backlog(t, st, "ent", 1, 400)
	ctx := context.Background()
	want := func(evs []outbox.Event, from int) {
		t.Helper()
		if len(evs) != 100 {
			t.Fatalf("DueRuns handed out %d events, want 100 from ent0000-%d", len(evs), from)
		}
		for i, ev := range evs {
			if w := fmt.Sprintf("ent0000-%d", from+i); ev.ID != w {
				t.Fatalf("DueRuns handed out %s at %d, want %s", ev.ID, i, w)
			}
		}
	}
	first, err := st.DueRuns(ctx, "r1", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	want(first, 0)
	second, err := st.DueRuns(ctx, "r1", 100, first)
	if err != nil {
		t.Fatal(err)
	}
	want(second, 100)
	rc.take()
	held.mu.Lock()
	held.armed = true
	held.mu.Unlock()
	var third []outbox.Event
	read := make(chan error, 1)
	go func() {
		var err error
		third, err = st.DueRuns(ctx, "r1", 100, append(slices.Clone(first), second...))
		read <- err
	}()
	<-held.answered
	if err := st.Published(ctx, first); err != nil {
		t.Fatal(err)
	}
	close(held.release)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	want(third, 200)
	queries, items := rc.take()
	if queries != 1 || items > 200 {
		t.Fatalf("the read overlapping the removal: %d queries of event partitions, %d items read, want 1 query of at most 200 items", queries, items)
	}
	if err := st.Published(ctx, append(second, third...)); err != nil {
		t.Fatal(err)
	}
	fourth, err := st.DueRuns(ctx, "r1", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	want(fourth, 300)
}

// acceptingSQS accepts every entry and keeps the event ids in the order
// sent.
type acceptingSQS struct {
	mu  sync.Mutex
	ids []string
}

func (a *acceptingSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		a.ids = append(a.ids, aws.ToString(e.MessageAttributes[producer.AttrID].StringValue))
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id})
	}
	return out, nil
}

func (a *acceptingSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"MaximumMessageSize": "1048576"}}, nil
}

// publishedCount closes done once n events were published.
type publishedCount struct {
	outbox.NopObserver
	mu   sync.Mutex
	n    int
	done chan struct{}
}

func (p *publishedCount) Published(evs []outbox.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n -= len(evs)
	if p.n <= 0 && p.done != nil {
		close(p.done)
		p.done = nil
	}
}

// uncountedStats sends the Stats reads (the Queries with a projection)
// past the counter.
type uncountedStats struct {
	*readCounter
	raw outboxdynamo.DynamoDBAPI
}

func (u uncountedStats) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if in.ProjectionExpression != nil {
		return u.raw.Query(ctx, in, opts...)
	}
	return u.readCounter.Query(ctx, in, opts...)
}

// A relay's Run removes a batch while it reads and sends the next ones,
// and still reads each event about once: the reads that a removal
// overlaps are kept (without the removed events), not made again. What is
// read twice is the tail of a backlog: a partition whose kept events are
// all in flight (sent, or being removed) starts a new pass, which reads
// them again (1.14-1.26 items per event on these 1,000 events, 1.10 when
// the removal did not lag; reading every batch twice would be 2). Each
// event is sent once, in commit order per entity.
func TestRelayRunReadsEachEventAboutOnce(t *testing.T) {
	for _, tc := range []struct {
		name                string
		entities, perEntity int
	}{
		{"4 entities of 250 events", 4, 250},
		{"100 entities of 10 events", 100, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, mk := newTable(t)
			raw := testenv.Dynamo(t)
			rc := &readCounter{DynamoDBAPI: raw}
			st := mk(outboxdynamo.Config{Client: uncountedStats{readCounter: rc, raw: raw}})
			names := backlog(t, st, "ent", tc.entities, tc.perEntity)
			rc.take()
			n := tc.entities * tc.perEntity
			client := &acceptingSQS{}
			obs := &publishedCount{n: n, done: make(chan struct{})}
			done := obs.done
			relay, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: client, QueueURL: "https://sqs.example/q", Observer: obs, Logger: zaptest.NewLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { _ = relay.Run(ctx) })
			select {
			case <-done:
			case <-time.After(time.Minute):
			}
			cancel()
			wg.Wait()
			queries, items := rc.take()
			perEvent := float64(items) / float64(n)
			t.Logf("%d events: %d queries of event partitions (Stats apart), %d items read, %.2f per event", n, queries, items, perEvent)
			client.mu.Lock()
			defer client.mu.Unlock()
			next := map[string]int{}
			for _, id := range client.ids {
				entity, _, _ := strings.Cut(id, "-")
				if want := fmt.Sprintf("%s-%d", entity, next[entity]); id != want {
					t.Fatalf("sent %s, want %s (each event once, in commit order)", id, want)
				}
				next[entity]++
			}
			for _, e := range names {
				if next[e] != tc.perEntity {
					t.Fatalf("sent %d events of %s, want %d", next[e], e, tc.perEntity)
				}
			}
			if perEvent > 1.5 {
				t.Fatalf("read %.2f items per event, want at most 1.5", perEvent)
			}
		})
	}
}
