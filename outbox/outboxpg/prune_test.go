package outboxpg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/pgstore"
)

// Prune removes the sequence rows of drained entities only, skips
// one a writer holds, and a pruned entity's next events still come out in
// order.
func TestPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	st := newStore(t, pool, outboxpg.Config{})
	for _, e := range []string{"done-1", "done-2", "pending", "held"} {
		if err := commit(ctx, pool, st, outbox.Event{ID: e + "-a", Entity: e, Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := st.Due(ctx, "r1", 10)
	if err != nil || len(evs) != 4 {
		t.Fatalf("Due: %d %v", len(evs), err)
	}
	var publish []outbox.Event
	for _, e := range evs {
		if e.Entity != "pending" {
			publish = append(publish, e)
		}
	}
	if err := st.Published(ctx, publish); err != nil {
		t.Fatal(err)
	}
	// A writer of "held" is in its transaction.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, tx, outbox.Event{ID: "held-b", Entity: "held", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	n, err := st.Prune(ctx, pgstore.PruneOptions{})
	if err != nil || n != 2 {
		t.Fatalf("Prune: %d %v, want the 2 drained entities", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := pool.Query(ctx, `SELECT entity_key FROM sqsonce_outbox_entities ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		left = append(left, k)
	}
	if fmt.Sprint(left) != "[held pending]" {
		t.Fatalf("entities left %v, want [held pending]", left)
	}
	// A pruned entity starts again, in order.
	for i := range 3 {
		if err := commit(ctx, pool, st, outbox.Event{ID: fmt.Sprintf("done-1-%d", i), Entity: "done-1", Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, id := range drainIDs(t, st, "r1") {
		if len(id) > 7 && id[:7] == "done-1-" {
			got = append(got, id)
		}
	}
	if fmt.Sprint(got) != "[done-1-0 done-1-1 done-1-2]" {
		t.Fatalf("after the prune: %v", got)
	}
}

// Published and Failed match the event id too: a stale handle whose
// (entity, seq) was reused by a new event after Prune touches
// nothing.
func TestStaleHandleTouchesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	st := newStore(t, pool, outboxpg.Config{})
	if err := commit(ctx, pool, st, outbox.Event{ID: "old", Entity: "e", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	stale, err := st.Due(ctx, "r1", 10)
	if err != nil || len(stale) != 1 {
		t.Fatal(len(stale), err)
	}
	if err := st.Published(ctx, stale); err != nil { // another relay published it
		t.Fatal(err)
	}
	if _, err := st.Prune(ctx, pgstore.PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := commit(ctx, pool, st, outbox.Event{ID: "new", Entity: "e", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Failed(ctx, stale[0], "late", stale[0].CreatedAt, true); err != nil {
		t.Fatal(err)
	}
	if err := st.Published(ctx, stale); err != nil {
		t.Fatal(err)
	}
	s, err := st.Stats(ctx)
	if err != nil || s.Pending != 1 || s.Dead != 0 {
		t.Fatalf("stats %+v %v: the new event must stay pending", s, err)
	}
}
