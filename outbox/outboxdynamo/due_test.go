package outboxdynamo_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxdynamo"
)

// readCounter counts the Queries of event partitions (pk b#NNNN) and the
// items they read (ScannedCount: what DynamoDB charges for).
type readCounter struct {
	outboxdynamo.DynamoDBAPI
	mu             sync.Mutex
	queries, items int
}

func (c *readCounter) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.DynamoDBAPI.Query(ctx, in, opts...)
	events := false
	for _, v := range in.ExpressionAttributeValues {
		if sv, ok := v.(*types.AttributeValueMemberS); ok && strings.HasPrefix(sv.Value, "b#") {
			events = true
		}
	}
	if err == nil && events {
		c.mu.Lock()
		c.queries++
		c.items += int(out.ScannedCount)
		c.mu.Unlock()
	}
	return out, err
}

func (c *readCounter) take() (queries, items int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	queries, items = c.queries, c.items
	c.queries, c.items = 0, 0
	return queries, items
}

// backlog commits perEntity events of each of entities entities, in
// transactions of 10 events, each entity's in order, and returns the
// entities' names. Event k of entity e has id "<e>-<k>".
func backlog(t *testing.T, st *outboxdynamo.Store, prefix string, entities, perEntity int) []string {
	t.Helper()
	names := make([]string, entities)
	for e := range names {
		names[e] = fmt.Sprintf("%s%04d", prefix, e)
	}
	ev := func(e, k int) outbox.Event {
		return outbox.Event{ID: fmt.Sprintf("%s-%d", names[e], k), Entity: names[e], Type: "t", Payload: fmt.Sprintf(`{"k":%d}`, k)}
	}
	// One goroutine per group of entities: an entity's transactions commit
	// one after another, so its events keep their order.
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(8)
	if perEntity >= 10 {
		for e := range entities {
			g.Go(func() error {
				for from := 0; from < perEntity; from += 10 {
					var evs []outbox.Event
					for k := from; k < min(from+10, perEntity); k++ {
						evs = append(evs, ev(e, k))
					}
					if err := st.Commit(ctx, func() ([]types.TransactWriteItem, error) { return st.Put(evs...) }); err != nil {
						return err
					}
				}
				return nil
			})
		}
	} else {
		for from := 0; from < entities; from += 10 {
			g.Go(func() error {
				for k := range perEntity {
					var evs []outbox.Event
					for e := from; e < min(from+10, entities); e++ {
						evs = append(evs, ev(e, k))
					}
					if err := st.Commit(ctx, func() ([]types.TransactWriteItem, error) { return st.Put(evs...) }); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("fill the outbox: %v", err)
	}
	return names
}

// Dead events and events waiting for a retry hold back their entities
// while Due skips past the rest of their backlog: over 20 entities of 100
// events with 5 heads dead and 5 waiting, Due returns exactly the other 10
// entities' oldest events, reading at most 15 items per entity, and after
// Requeue and the retry time, the held-back heads themselves.
func TestDueSkipsHeldBackEntities(t *testing.T) {
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	_, mk := newTable(t)
	rc := &readCounter{DynamoDBAPI: testenv.Dynamo(t)}
	st := mk(outboxdynamo.Config{Client: rc, NowFunc: now, Lease: time.Hour})
	ctx := context.Background()
	names := backlog(t, st, "held", 20, 100)
	heads, err := st.Due(ctx, "r1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != 20 {
		t.Fatalf("Due(100) over 20 entities: %d events", len(heads))
	}
	held := map[string]string{} // entity → "dead" or "waiting"
	for i, e := range heads {
		e.Attempts = 1
		switch {
		case i%4 == 0:
			held[e.Entity] = "dead"
			err = st.Failed(ctx, e, "rejected", now(), true)
		case i%4 == 1:
			held[e.Entity] = "waiting"
			err = st.Failed(ctx, e, "throttled", now().Add(time.Minute), false)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rc.take()
	evs, err := st.Due(ctx, "r1", 100)
	if err != nil {
		t.Fatal(err)
	}
	queries, items := rc.take()
	t.Logf("Due(100) over 20 entities of 100 events, 10 held back: %d events, %d queries, %d items read", len(evs), queries, items)
	got := map[string]bool{}
	for _, e := range evs {
		if held[e.Entity] != "" || e.ID != e.Entity+"-0" || got[e.Entity] {
			t.Fatalf("Due returned %s (entity %s is %q): want only the oldest event of entities not held back", e.ID, e.Entity, held[e.Entity])
		}
		got[e.Entity] = true
	}
	if len(got) != 20-len(held) {
		t.Fatalf("Due returned %d events, want %d", len(got), 20-len(held))
	}
	if items > 15*len(names) {
		t.Fatalf("Due read %d items in %d queries over 20 entities: want at most %d", items, queries, 15*len(names))
	}

	if n, err := st.Requeue(ctx); err != nil || n != 5 {
		t.Fatalf("Requeue: %d %v, want 5", n, err)
	}
	mu.Lock()
	clock = clock.Add(2 * time.Minute)
	mu.Unlock()
	evs, err = st.Due(ctx, "r1", 100)
	if err != nil {
		t.Fatal(err)
	}
	back := 0
	for _, e := range evs {
		if e.ID != e.Entity+"-0" {
			t.Fatalf("after Requeue and the retry time Due returned %s, want entities' oldest events", e.ID)
		}
		if held[e.Entity] != "" {
			back++
		}
	}
	if len(evs) != 20 || back != 10 {
		t.Fatalf("after Requeue and the retry time: %d events, %d of them held back before; want 20 and 10", len(evs), back)
	}
}
