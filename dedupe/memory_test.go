package dedupe_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
)

func TestMemoryConformance(t *testing.T) {
	dedupetest.Run(t, func(t *testing.T, now func() time.Time) dedupe.Store {
		return dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "test", NowFunc: now})
	})
}

// TestMemoryForgetsExpiredRecords: a million distinct keys, each claimed
// and completed (every tenth left IN_PROGRESS, as by a crashed worker),
// with a clock that moves 1 ms per key past a 10 s TTL: at most about
// 10,000 records are live at any time, so the live heap after a GC must
// stay flat. Kept records cost over 200 bytes each: a store that never
// forgets grows by more than 20 MB per 100,000 keys.
func TestMemoryForgetsExpiredRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("a million keys")
	}
	const (
		keys    = 1_000_000
		every   = 100_000 // keys between heap checkpoints
		ttl     = 10 * time.Second
		step    = time.Millisecond
		allowed = 4 << 20 // growth over the first checkpoint: 4 bytes per key
	)
	clock := dedupetest.NewClock(time.Unix(1_800_000_000, 0))
	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "flat", TTL: ttl, NowFunc: clock.Now})
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var base uint64
	for i := range keys {
		key := "key-" + strconv.Itoa(i)
		c, err := store.Claim(ctx, key, "", time.Second)
		if err != nil || c.Status != dedupe.Claimed {
			t.Fatalf("claim %s: %s %v", key, c.Status, err)
		}
		if i%10 != 0 {
			if err := store.Complete(ctx, key, c.Token); err != nil {
				t.Fatalf("complete %s: %v", key, err)
			}
		}
		clock.Advance(step)
		if (i+1)%every != 0 {
			continue
		}
		h := heap()
		t.Logf("after %7d keys: live heap %6.1f MB", i+1, float64(h)/(1<<20))
		if base == 0 {
			base = h // the first checkpoint is past the TTL: steady state
			continue
		}
		if h > base+allowed {
			t.Fatalf("after %d keys the live heap is %.1f MB, %.1f MB over the first checkpoint (allowed %.1f MB): expired records are kept",
				i+1, float64(h)/(1<<20), float64(h-base)/(1<<20), float64(allowed)/(1<<20))
		}
	}
	// Expired keys were forgotten, not only hidden: an old key claims anew,
	// a live one is still a duplicate.
	if c, _ := store.Claim(ctx, "key-1", "", time.Second); c.Status != dedupe.Claimed {
		t.Fatalf("expired key: %s, want claimed", c.Status)
	}
	if c, _ := store.Claim(ctx, "key-"+strconv.Itoa(keys-1), "", time.Second); c.Status != dedupe.Duplicate {
		t.Fatalf("live key: %s, want duplicate", c.Status)
	}
}
