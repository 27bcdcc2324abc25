// Package outboxtest is the conformance suite every outbox [outbox.Store]
// passes: commit order per entity, retries and parked events holding back
// their entity only, parked events discarded or edited so that their
// entity moves on, partitions shared between relays and taken over when a
// relay stops, the counts of [outbox.Store.Stats], and each event's trace
// context kept as written.
//
//	func TestConformance(t *testing.T) {
//		outboxtest.Run(t, func(t *testing.T) outboxtest.Harness { ... })
//	}
//
// [RunRelays] adds the scenarios that run relays against a real FIFO
// queue.
package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/leasetest"
	"github.com/sqsonce/sqsonce/outbox"
)

// Harness is one fresh, empty store and the means to drive it.
type Harness struct {
	Store outbox.Store
	// Commit writes evs in one transaction of the store's backend.
	Commit func(ctx context.Context, evs ...outbox.Event) error
	// Clock is the store's clock: its NowFunc must be Clock.Now. Unused
	// by [RunRelays], whose stores run on the wall clock.
	Clock *Clock
	// Lease is the store's partition lease.
	Lease time.Duration
}

// Clock is a settable clock for the store under test (the one the dedupe
// and idempotency suites use).
type Clock = leasetest.Clock

// NewClock returns a clock at a fixed time.
func NewClock() *Clock { return leasetest.NewClock(time.Unix(1_900_000_000, 0)) }

// Run runs the suite; newHarness returns a fresh store for each subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("CommitOrderPerEntity", func(t *testing.T) { commitOrder(t, newHarness(t)) })
	t.Run("RetryHoldsBackItsEntityOnly", func(t *testing.T) { retryHoldsBack(t, newHarness(t)) })
	t.Run("DeadIsParkedCountedAndRequeued", func(t *testing.T) { deadParked(t, newHarness(t)) })
	t.Run("DeadIsDiscardedOrEdited", func(t *testing.T) { deadDiscardedOrEdited(t, newHarness(t)) })
	t.Run("OwnersSharePartitions", func(t *testing.T) { ownersShare(t, newHarness(t)) })
	t.Run("TakeoverAfterLease", func(t *testing.T) { takeover(t, newHarness(t)) })
	t.Run("ReleaseHandsOver", func(t *testing.T) { release(t, newHarness(t)) })
	t.Run("StatsAndInvalid", func(t *testing.T) { statsAndInvalid(t, newHarness(t)) })
	t.Run("TraceContextKept", func(t *testing.T) { traceKept(t, newHarness(t)) })
	t.Run("NotBeforeKept", func(t *testing.T) { notBeforeKept(t, newHarness(t)) })
}

func ev(entity string, n int) outbox.Event {
	return outbox.Event{ID: fmt.Sprintf("%s-%03d", entity, n), Entity: entity, Type: "t", Payload: fmt.Sprintf(`{"e":%q,"n":%d}`, entity, n)}
}

func due(t *testing.T, h Harness, owner string) []outbox.Event {
	t.Helper()
	evs, err := h.Store.Due(context.Background(), owner, 1000)
	if err != nil {
		t.Fatalf("Due(%s): %v", owner, err)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.Entity] {
			t.Fatalf("Due returned two events of entity %s at once", e.Entity)
		}
		seen[e.Entity] = true
	}
	return evs
}

func published(t *testing.T, h Harness, evs []outbox.Event) {
	t.Helper()
	if err := h.Store.Published(context.Background(), evs); err != nil {
		t.Fatalf("Published: %v", err)
	}
}

func commit(t *testing.T, h Harness, evs ...outbox.Event) {
	t.Helper()
	if err := h.Commit(context.Background(), evs...); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// drain publishes everything owner can see and returns the ids in the
// order they were handed out, per entity.
func drain(t *testing.T, h Harness, owner string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for range 100 {
		evs := due(t, h, owner)
		if len(evs) == 0 {
			return got
		}
		for _, e := range evs {
			got[e.Entity] = append(got[e.Entity], e.ID)
		}
		published(t, h, evs)
	}
	t.Fatal("the outbox did not drain in 100 rounds")
	return nil
}

func commitOrder(t *testing.T, h Harness) {
	// Interleaved transactions over three entities, one holding two events.
	for i := range 5 {
		commit(t, h, ev("a", i))
		commit(t, h, ev("b", i), ev("c", 2*i), ev("c", 2*i+1))
	}
	got := drain(t, h, "r1")
	for entity, n := range map[string]int{"a": 5, "b": 5, "c": 10} {
		ids := got[entity]
		if len(ids) != n {
			t.Fatalf("entity %s: published %v, want %d events", entity, ids, n)
		}
		for i, id := range ids {
			if want := ev(entity, i).ID; id != want {
				t.Fatalf("entity %s: event %d is %s, want %s (commit order): %v", entity, i, id, want, ids)
			}
		}
	}
	if evs := due(t, h, "r1"); len(evs) != 0 {
		t.Fatalf("published events came back: %v", evs)
	}
}

func retryHoldsBack(t *testing.T, h Harness) {
	commit(t, h, ev("a", 0), ev("a", 1), ev("b", 0))
	evs := due(t, h, "r1")
	var a outbox.Event
	for _, e := range evs {
		if e.Entity == "a" {
			a = e
		}
	}
	if a.ID != "a-000" || len(evs) != 2 {
		t.Fatalf("first Due: %v", evs)
	}
	a.Attempts++
	if err := h.Store.Failed(context.Background(), a, "send: throttled", h.Clock.Now().Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Entity == "b" {
			published(t, h, []outbox.Event{e})
		}
	}
	if evs := due(t, h, "r1"); len(evs) != 0 {
		t.Fatalf("while a-000 waits for its retry, Due returned %v (a-001 must wait behind it)", evs)
	}
	h.Clock.Advance(2 * time.Minute)
	evs = due(t, h, "r1")
	if len(evs) != 1 || evs[0].ID != "a-000" || evs[0].Attempts != 1 || evs[0].LastError != "send: throttled" {
		t.Fatalf("after the retry time: %+v, want a-000 with 1 attempt and its reason", evs)
	}
}

func deadParked(t *testing.T, h Harness) {
	commit(t, h, ev("a", 0), ev("a", 1), ev("b", 0), ev("b", 1))
	evs := due(t, h, "r1")
	for _, e := range evs {
		if e.Entity != "a" {
			continue
		}
		e.Attempts = 10
		if err := h.Store.Failed(context.Background(), e, "InvalidMessageContents", h.Clock.Now(), true); err != nil {
			t.Fatal(err)
		}
	}
	got := drain(t, h, "r1")
	if len(got["a"]) != 0 || fmt.Sprint(got["b"]) != "[b-000 b-001]" {
		t.Fatalf("with a-000 dead: published %v; a must wait, b must flow", got)
	}
	s, err := h.Store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Dead != 1 || len(s.DeadEvents) != 1 || s.DeadEvents[0].ID != "a-000" || s.DeadEvents[0].LastError != "InvalidMessageContents" || s.Pending != 1 {
		t.Fatalf("stats %+v, want 1 dead (a-000 with its reason) and 1 pending (a-001)", s)
	}
	n, err := h.Store.Requeue(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Requeue: %d %v", n, err)
	}
	got = drain(t, h, "r1")
	if fmt.Sprint(got["a"]) != "[a-000 a-001]" {
		t.Fatalf("after Requeue: %v", got)
	}
}

// park fails the due event id for good.
func park(t *testing.T, h Harness, id string) {
	t.Helper()
	for _, e := range due(t, h, "r1") {
		if e.ID != id {
			continue
		}
		e.Attempts = 1
		if err := h.Store.Failed(context.Background(), e, "InvalidMessageContents", h.Clock.Now(), true); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is not due", id)
}

// deadDiscardedOrEdited: Discard drops a dead event, Edit replaces its
// payload and makes it pending in its place; either lets its entity's later
// events go out, and neither touches an event that is not dead.
func deadDiscardedOrEdited(t *testing.T, h Harness) {
	ctx := context.Background()
	commit(t, h, ev("a", 0), ev("a", 1), ev("a", 2), ev("b", 0), ev("b", 1))
	park(t, h, "a-000")
	park(t, h, "b-000")
	for _, id := range []string{"a-001", "nope"} {
		if err := h.Store.Discard(ctx, id); !errors.Is(err, outbox.ErrNotDead) {
			t.Fatalf("Discard(%s): %v, want ErrNotDead", id, err)
		}
		if err := h.Store.Edit(ctx, id, "x"); !errors.Is(err, outbox.ErrNotDead) {
			t.Fatalf("Edit(%s): %v, want ErrNotDead", id, err)
		}
	}
	if err := h.Store.Edit(ctx, "b-000", ""); !errors.Is(err, outbox.ErrNoPayload) {
		t.Fatalf("Edit with an empty payload: %v, want ErrNoPayload", err)
	}
	if err := h.Store.Discard(ctx, "a-000"); err != nil {
		t.Fatalf("Discard(a-000): %v", err)
	}
	if err := h.Store.Discard(ctx, "a-000"); !errors.Is(err, outbox.ErrNotDead) {
		t.Fatalf("Discard(a-000) again: %v, want ErrNotDead", err)
	}
	if err := h.Store.Edit(ctx, "b-000", `{"fixed":true}`); err != nil {
		t.Fatalf("Edit(b-000): %v", err)
	}
	s, err := h.Store.Stats(ctx)
	if err != nil || s.Dead != 0 || s.Pending != 4 {
		t.Fatalf("stats %+v %v, want none dead and 4 pending", s, err)
	}
	var edited outbox.Event
	got := map[string][]string{}
	for range 10 {
		evs := due(t, h, "r1")
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.ID == "b-000" {
				edited = e
			}
			got[e.Entity] = append(got[e.Entity], e.ID)
		}
		published(t, h, evs)
	}
	if fmt.Sprint(got["a"]) != "[a-001 a-002]" || fmt.Sprint(got["b"]) != "[b-000 b-001]" {
		t.Fatalf("published %v; want a-001 a-002 (a-000 discarded) and b-000 b-001 (b-000 edited, in its place)", got)
	}
	if edited.Payload != `{"fixed":true}` || edited.Attempts != 0 || edited.Dead {
		t.Fatalf("edited event %+v, want the new payload, 0 attempts, not dead", edited)
	}
}

func ownersShare(t *testing.T, h Harness) {
	var evs []outbox.Event
	for i := range 64 {
		evs = append(evs, ev(fmt.Sprintf("e%02d", i), 0), ev(fmt.Sprintf("e%02d", i), 1))
	}
	commit(t, h, evs[:len(evs)/2]...)
	commit(t, h, evs[len(evs)/2:]...)
	owners := []string{"r1", "r2"}
	seen := map[string]map[string]bool{"r1": {}, "r2": {}}
	counts := map[string]int{}
	var order []string
	for round := 0; round < 50; round++ {
		handed := map[string]string{}
		for _, o := range owners {
			for _, e := range due(t, h, o) {
				if other, ok := handed[e.Entity]; ok {
					t.Fatalf("round %d: entity %s handed to %s and %s at once", round, e.Entity, other, o)
				}
				handed[e.Entity] = o
				seen[o][e.Entity] = true
				counts[o]++
				order = append(order, e.ID)
				published(t, h, []outbox.Event{e})
			}
		}
		if len(handed) == 0 && round > 2 {
			break
		}
		// Relays renew their leases as time passes; a store may cache its
		// partitions for a fraction of the lease.
		h.Clock.Advance(h.Lease / 2)
	}
	if counts["r1"]+counts["r2"] != 128 {
		t.Fatalf("published %d events, want 128", counts["r1"]+counts["r2"])
	}
	if counts["r1"] == 0 || counts["r2"] == 0 {
		t.Fatalf("one owner did all the work: %v", counts)
	}
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	for i := range 64 {
		e := fmt.Sprintf("e%02d", i)
		if pos[e+"-000"] > pos[e+"-001"] {
			t.Fatalf("entity %s out of order", e)
		}
	}
}

func takeover(t *testing.T, h Harness) {
	for i := range 20 {
		commit(t, h, ev(fmt.Sprintf("e%02d", i), 0))
	}
	first := due(t, h, "r1") // r1 alone: it takes every partition
	if len(first) != 20 {
		t.Fatalf("a lone owner got %d of 20 events", len(first))
	}
	if evs := due(t, h, "r2"); len(evs) != 0 {
		t.Fatalf("r2 got %d events while r1 holds every partition", len(evs))
	}
	h.Clock.Advance(h.Lease + time.Second) // r1 stops renewing
	if evs := due(t, h, "r2"); len(evs) != 20 {
		t.Fatalf("after r1's leases ended r2 got %d of 20 events", len(evs))
	}
}

func release(t *testing.T, h Harness) {
	for i := range 20 {
		commit(t, h, ev(fmt.Sprintf("e%02d", i), 0))
	}
	if len(due(t, h, "r1")) != 20 {
		t.Fatal("a lone owner must get every event")
	}
	if err := h.Store.Release(context.Background(), "r1"); err != nil {
		t.Fatal(err)
	}
	if evs := due(t, h, "r2"); len(evs) != 20 {
		t.Fatalf("after r1 released, r2 got %d of 20 events", len(evs))
	}
}

func statsAndInvalid(t *testing.T, h Harness) {
	s, err := h.Store.Stats(context.Background())
	if err != nil || s.Pending != 0 || !s.Oldest.IsZero() || s.Dead != 0 {
		t.Fatalf("empty outbox: %+v %v", s, err)
	}
	start := h.Clock.Now()
	commit(t, h, ev("a", 0))
	h.Clock.Advance(time.Minute)
	commit(t, h, ev("a", 1), ev("b", 0))
	s, err = h.Store.Stats(context.Background())
	if err != nil || s.Pending != 3 || !s.Oldest.Equal(start) {
		t.Fatalf("stats %+v %v, want 3 pending, oldest at %v", s, err, start)
	}
	for _, bad := range []outbox.Event{{Payload: "x"}, {Entity: "a"}} {
		err := h.Commit(context.Background(), ev("z", 0), bad)
		if !errors.Is(err, outbox.ErrNoEntity) && !errors.Is(err, outbox.ErrNoPayload) {
			t.Fatalf("invalid event %+v: %v", bad, err)
		}
	}
	if s, _ := h.Store.Stats(context.Background()); s.Pending != 3 {
		t.Fatalf("a transaction with an invalid event stored something: %d pending", s.Pending)
	}
	// Publishing the same events twice is harmless.
	evs := due(t, h, "r1")
	published(t, h, evs)
	published(t, h, evs)
}

// traceKept: an event's trace context comes back from Due as written.
func traceKept(t *testing.T, h Harness) {
	traced := ev("a", 0)
	traced.Trace = map[string]string{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tracestate":  "vendor=x",
	}
	commit(t, h, traced, ev("b", 0))
	got := map[string]map[string]string{}
	for _, e := range due(t, h, "r1") {
		got[e.ID] = e.Trace
	}
	if len(got) != 2 {
		t.Fatalf("Due returned %d events, want 2", len(got))
	}
	if tr := got["a-000"]; len(tr) != 2 || tr["traceparent"] != traced.Trace["traceparent"] || tr["tracestate"] != "vendor=x" {
		t.Fatalf("trace context %v, want %v", tr, traced.Trace)
	}
	if tr := got["b-000"]; len(tr) != 0 {
		t.Fatalf("an event written without a trace context came back with %v", tr)
	}
}

// notBeforeKept: an event's NotBefore comes back from Due as written (to
// the millisecond), and does not hold the event back: the relay sends it
// at once with that time, for the consumer to hold.
func notBeforeKept(t *testing.T, h Harness) {
	later := ev("a", 0)
	later.NotBefore = h.Clock.Now().Add(2*time.Hour + 123456789)
	commit(t, h, later, ev("b", 0))
	got := map[string]time.Time{}
	for _, e := range due(t, h, "r1") {
		got[e.ID] = e.NotBefore
	}
	if len(got) != 2 {
		t.Fatalf("Due returned %d events, want both, the one not before 2h from now included", len(got))
	}
	if nb := got["a-000"]; !nb.Equal(later.NotBefore.Truncate(time.Millisecond)) {
		t.Fatalf("NotBefore %v, want %v", nb, later.NotBefore.Truncate(time.Millisecond))
	}
	if nb := got["b-000"]; !nb.IsZero() {
		t.Fatalf("an event written without a NotBefore came back with %v", nb)
	}
}
