package outboxpg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
)

// drainIDs publishes everything owner can see, in rounds, and returns the
// ids handed out.
func drainIDs(t *testing.T, st *outboxpg.Store, owner string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for range 100 {
		evs, err := st.Due(ctx, owner, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return ids
		}
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		if err := st.Published(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the outbox did not drain")
	return nil
}

// waitForLockWait returns once a backend of the test's schema waits on a
// lock (the second writer of an entity, queued behind the first).
func waitForLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%sqsonce_outbox_entities%'`).Scan(&n)
		if err != nil {
			t.Fatalf("waiting for the blocked writer: %v", err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the second writer never waited for the first")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A transaction that writes an entity's event first but commits last:
// the relay publishes what committed meanwhile, never skips the late event,
// and a second writer of the same entity waits for the first, so the
// entity's events come out in commit order.
func TestLateCommitIsNotSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	st := newStore(t, pool, outboxpg.Config{})

	slow, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx) //nolint:errcheck
	if err := st.Put(ctx, slow, outbox.Event{ID: "e-1", Entity: "e", Payload: "1"}); err != nil {
		t.Fatal(err)
	}
	// Other entities commit while it is open, and are published.
	if err := commit(ctx, pool, st, outbox.Event{ID: "f-1", Entity: "f", Payload: "1"}); err != nil {
		t.Fatal(err)
	}
	if got := drainIDs(t, st, "r1"); fmt.Sprint(got) != "[f-1]" {
		t.Fatalf("while e-1 is uncommitted: published %v, want [f-1]", got)
	}
	// A second writer of e queues behind the first.
	second := make(chan error, 1)
	go func() { second <- commit(ctx, pool, st, outbox.Event{ID: "e-2", Entity: "e", Payload: "2"}) }()
	waitForLockWait(t, pool)
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if got := drainIDs(t, st, "r1"); fmt.Sprint(got) != "[e-1 e-2]" {
		t.Fatalf("after the late commit: published %v, want [e-1 e-2] (commit order)", got)
	}
}

// Eight writers commit events of five entities with random pauses inside
// their transactions, while three relays drain the outbox at once. Every
// event is published once, and each entity's events in commit order (as
// recorded by a serial number taken inside each transaction after Put).
func TestConcurrentWritersAndRelaysKeepCommitOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE commits (n bigserial PRIMARY KEY, entity text NOT NULL, id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	st := newStore(t, pool, outboxpg.Config{Partitions: 4})
	const writers, perWriter, entities = 8, 25, 5

	var (
		relays    sync.WaitGroup
		mu        sync.Mutex
		published = map[string][]string{}
		seen      = map[string]int{}
	)
	done := make(chan struct{})
	for r := range 3 {
		relays.Go(func() {
			owner := fmt.Sprintf("relay-%d", r)
			defer st.Release(context.WithoutCancel(ctx), owner) //nolint:errcheck
			for {
				evs, err := st.Due(ctx, owner, 10)
				if err != nil {
					t.Errorf("Due: %v", err)
					return
				}
				mu.Lock()
				for _, e := range evs {
					published[e.Entity] = append(published[e.Entity], e.ID)
					seen[e.ID]++
				}
				mu.Unlock()
				if err := st.Published(ctx, evs); err != nil {
					t.Errorf("Published: %v", err)
					return
				}
				if len(evs) == 0 {
					select {
					case <-done:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
		})
	}
	var writersWG sync.WaitGroup
	for w := range writers {
		writersWG.Go(func() {
			for i := range perWriter {
				entity := fmt.Sprintf("ent-%d", rand.IntN(entities))
				id := fmt.Sprintf("w%d-%03d", w, i)
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if err := st.Put(ctx, tx, outbox.Event{ID: id, Entity: entity, Payload: id}); err != nil {
						return err
					}
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // work after the write
					_, err := tx.Exec(ctx, `INSERT INTO commits (entity, id) VALUES ($1, $2)`, entity, id)
					return err
				})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	writersWG.Wait()
	// Let the relays drain, then stop them.
	for {
		s, err := st.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the relays did not drain the outbox: %+v", s)
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(done)
	relays.Wait()

	rows, err := pool.Query(ctx, `SELECT entity, id FROM commits ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	total := 0
	for rows.Next() {
		var e, id string
		if err := rows.Scan(&e, &id); err != nil {
			t.Fatal(err)
		}
		want[e] = append(want[e], id)
		total++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if total != writers*perWriter {
		t.Fatalf("%d commits, want %d", total, writers*perWriter)
	}
	for e, ids := range want {
		if !slices.Equal(published[e], ids) {
			t.Fatalf("entity %s: published\n%s\nwant commit order\n%s", e, strings.Join(published[e], " "), strings.Join(ids, " "))
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s handed out %d times", id, n)
		}
	}
}
