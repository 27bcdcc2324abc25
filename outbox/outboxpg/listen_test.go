package outboxpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
)

// A commit wakes a waiting Listener; an uncommitted or rolled-back Put
// does not; without events Wait times out and the relay polls.
func TestListenerWakesOnCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	// A channel of the test's own: notifications are database-wide.
	st := newStore(t, pool, outboxpg.Config{Channel: "outbox_" + t.Name()})
	l := st.Listener(pool)
	defer l.Close(ctx) //nolint:errcheck

	if woke, err := l.Wait(ctx, time.Minute); err != nil || !woke {
		t.Fatalf("the Wait that connects: woke=%v err=%v, want woken at once", woke, err)
	}
	if woke, err := l.Wait(ctx, 50*time.Millisecond); err != nil || woke {
		t.Fatalf("Wait with nothing committed: woke=%v err=%v, want a timeout", woke, err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, tx, outbox.Event{Entity: "a", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if woke, err := l.Wait(ctx, 50*time.Millisecond); err != nil || woke {
		t.Fatalf("Wait after a rollback: woke=%v err=%v, want a timeout", woke, err)
	}
	// Committed before Wait is called: the notification waits for it.
	if err := commit(ctx, pool, st, outbox.Event{Entity: "a", Payload: "y"}); err != nil {
		t.Fatal(err)
	}
	if woke, err := l.Wait(ctx, time.Minute); err != nil || !woke {
		t.Fatalf("Wait after a commit: woke=%v err=%v, want woken", woke, err)
	}
	// Committed while waiting.
	done := make(chan error, 1)
	go func() {
		woke, err := l.Wait(ctx, time.Minute)
		if err == nil && !woke {
			err = context.DeadlineExceeded
		}
		done <- err
	}()
	if err := commit(ctx, pool, st, outbox.Event{Entity: "b", Payload: "z"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait during a commit: %v", err)
	}
}

// An event committed after the relay's last poll but before its Listener
// connected is heard of: the Wait that connects returns at once, woken, so
// the relay polls again with LISTEN in place.
func TestListenerConnectWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	st := newStore(t, pool, outboxpg.Config{Channel: "outbox_" + t.Name()})
	l := st.Listener(pool)
	defer l.Close(ctx) //nolint:errcheck
	if err := commit(ctx, pool, st, outbox.Event{Entity: "a", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	if woke, err := l.Wait(ctx, 5*time.Second); err != nil || !woke {
		t.Fatalf("the first Wait, after a commit nobody heard: woke=%v err=%v, want woken at once", woke, err)
	}
}
