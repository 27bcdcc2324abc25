package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/outbox"
)

// With a WaitFunc the relay waits on it, not on PollInterval: an event put
// while it waits is published when WaitFunc wakes it. After WaitFunc
// fails the relay polls every second (not every PollInterval, and not in a
// busy loop) and calls WaitFunc again, which recovers.
func TestRelayWaitFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		store := outbox.NewMemory(outbox.MemoryConfig{})
		client := &fakeSQS{}
		var (
			mu    sync.Mutex
			calls []time.Duration // the d of each call
			fail  bool
		)
		wake := make(chan struct{}, 1)
		r, err := outbox.NewRelay(outbox.RelayConfig{
			Store: store, Client: client, QueueURL: "https://sqs.example/q", PollInterval: time.Hour,
			WaitFunc: func(ctx context.Context, d time.Duration) (bool, error) {
				mu.Lock()
				calls = append(calls, d)
				failing := fail
				mu.Unlock()
				if failing {
					return false, errors.New("listener connection lost")
				}
				select {
				case <-wake:
					return true, nil
				case <-time.After(d):
					return false, nil
				case <-ctx.Done():
					return false, ctx.Err()
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = r.Run(ctx) })
		synctest.Wait() // the relay polled and waits
		start := time.Now()
		if err := store.Put(ctx, outbox.Event{ID: "a1", Entity: "a", Payload: "ok"}); err != nil {
			t.Fatal(err)
		}
		wake <- struct{}{}
		synctest.Wait()
		client.mu.Lock()
		sent := len(client.sent)
		client.mu.Unlock()
		if sent != 1 || time.Since(start) != 0 {
			t.Fatalf("after a wake-up: %d sent after %v, want 1 at once", sent, time.Since(start))
		}
		mu.Lock()
		if len(calls) != 2 || calls[0] != time.Hour {
			t.Fatalf("WaitFunc calls %v, want 2 with the poll interval", calls)
		}
		fail, calls = true, nil
		mu.Unlock()
		wake <- struct{}{} // the relay's current wait ends; the next ones fail
		time.Sleep(10*time.Second + time.Millisecond)
		mu.Lock()
		n := len(calls)
		fail = false
		mu.Unlock()
		if n != 11 {
			t.Fatalf("%d WaitFunc calls in 10s of failures, want 11 (a poll and a retry every second)", n)
		}
		// Working again: the relay waits on it for the poll interval.
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		n = len(calls)
		mu.Unlock()
		time.Sleep(30 * time.Minute)
		mu.Lock()
		if len(calls) != n {
			t.Fatalf("WaitFunc called %d times in 30 minutes once it works, want 0", len(calls)-n)
		}
		mu.Unlock()
		cancel()
		wg.Wait()
	})
}

// An entity's events go out one step at a time (the next is due once the
// one before is published), so a step smaller than BatchSize does not mean
// the outbox is empty: the relay polls again at once and waits only after
// a step that found nothing. Before, it waited PollInterval after every
// step short of a full batch, and with a WaitFunc and no new commits a
// backlog of a few entities drained one event per entity per interval.
func TestRelayDrainsEntityBacklogWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		store := outbox.NewMemory(outbox.MemoryConfig{})
		for i := range 30 {
			ev := outbox.Event{ID: fmt.Sprintf("e%02d", i), Entity: fmt.Sprintf("acct-%d", i%3), Payload: "ok"}
			if err := store.Put(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
		client := &fakeSQS{}
		r, err := outbox.NewRelay(outbox.RelayConfig{Store: store, Client: client, QueueURL: "https://sqs.example/q", PollInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = r.Run(ctx) })
		synctest.Wait()
		client.mu.Lock()
		sent := len(client.sent)
		client.mu.Unlock()
		if sent != 30 {
			t.Errorf("%d of 30 events sent before the first PollInterval passed, want all (3 entities × 10 events, BatchSize 100)", sent)
		}
		cancel()
		wg.Wait()
	})
}
