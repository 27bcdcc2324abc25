package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/sqsonce/sqsonce/outbox"
)

// combinedStore is a Memory store with PublishedDueRuns, whose first
// fail calls fail with no effect.
type combinedStore struct {
	*outbox.Memory
	mu       sync.Mutex
	fail     int
	combined int // successful PublishedDueRuns calls
}

func (s *combinedStore) PublishedDueRuns(ctx context.Context, owner string, limit int, published, inFlight []outbox.Event) ([]outbox.Event, error) {
	s.mu.Lock()
	if s.fail > 0 {
		s.fail--
		s.mu.Unlock()
		return nil, errors.New("connection reset")
	}
	s.combined++
	s.mu.Unlock()
	if err := s.Memory.Published(ctx, published); err != nil {
		return nil, err
	}
	return s.Memory.DueRuns(ctx, owner, limit, inFlight)
}

// With a PublishedRunStore, Run removes a batch's published events and
// reads the next batch in one call; when that call fails (with no
// effect), it removes and reads each on its own, as without it: every
// event is published once, in commit order per entity, and removed.
func TestRelayRunRemovesAndReadsInOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mem := outbox.NewMemory(outbox.MemoryConfig{})
		const entities, perEntity = 3, 6
		for i := range perEntity {
			for e := range entities {
				id := fmt.Sprintf("%c%d", 'a'+e, i)
				if err := mem.Put(ctx, outbox.Event{ID: id, Entity: id[:1], Payload: id}); err != nil {
					t.Fatal(err)
				}
			}
		}
		st := &combinedStore{Memory: mem, fail: 1}
		client := &overlapSQS{during: func(int) bool { return true }}
		done := make(chan struct{})
		relay, err := outbox.NewRelay(outbox.RelayConfig{Store: st, Client: client, QueueURL: "https://sqs.example/q", BatchSize: 3,
			Observer: &doneAfter{n: entities * perEntity, done: done}})
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
		sent := map[string][]string{}
		for _, call := range client.bodies {
			for _, b := range call {
				sent[b[:1]] = append(sent[b[:1]], b)
			}
		}
		for e := range entities {
			k := string(rune('a' + e))
			want := make([]string, perEntity)
			for i := range want {
				want[i] = fmt.Sprintf("%s%d", k, i)
			}
			if fmt.Sprint(sent[k]) != fmt.Sprint(want) {
				t.Fatalf("entity %s: sent %v, want %v (each once, in commit order)", k, sent[k], want)
			}
		}
		s, err := mem.Stats(context.Background())
		if err != nil || s.Pending != 0 {
			t.Fatalf("%d events left (%v), want 0", s.Pending, err)
		}
		if st.combined == 0 || st.fail != 0 {
			t.Fatalf("PublishedDueRuns: %d calls worked, %d failures left, want some and none", st.combined, st.fail)
		}
	})
}
