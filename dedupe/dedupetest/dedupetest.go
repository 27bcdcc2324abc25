// Package dedupetest is the conformance suite every [dedupe.Store] passes.
//
//	func TestConformance(t *testing.T) {
//		dedupetest.Run(t, func(t *testing.T, now func() time.Time) dedupe.Store {
//			return dedupe.NewMemory(dedupe.MemoryConfig{NowFunc: now})
//		})
//	}
//
// The suite controls time: the store must read the clock only through the
// now function it is given. It moves that clock forward past leases and
// past the record TTL (by 1000 days), so a store under test must use a TTL
// shorter than that.
package dedupetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/leasekey"
)

// NewStore returns a fresh store whose clock is now. Each subtest calls it
// once; the store may share a table with others (keys are unique per
// subtest).
type NewStore func(t *testing.T, now func() time.Time) dedupe.Store

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock set to start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const (
	lease = 30 * time.Second
	fp    = "fingerprint-a"
	fpB   = "fingerprint-b"
	// farFuture is past any record TTL a store under test uses.
	farFuture = 1000 * 24 * time.Hour
)

// Key returns a unique key for one test.
func Key(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

type env struct {
	t     *testing.T
	ctx   context.Context
	clock *Clock
	store dedupe.Store
	key   string
}

func setup(t *testing.T, newStore NewStore) *env {
	t.Helper()
	// A wall-clock start keeps stores that compare with server-side data
	// meaningful; the suite only ever moves it forward.
	clock := NewClock(time.Now().Truncate(time.Millisecond))
	return &env{t: t, ctx: context.Background(), clock: clock, store: newStore(t, clock.Now), key: Key("conformance")}
}

func (e *env) claim(fingerprint string, want dedupe.Status) dedupe.Claim {
	e.t.Helper()
	c, err := e.store.Claim(e.ctx, e.key, fingerprint, lease)
	if err != nil {
		e.t.Fatalf("Claim: %v", err)
	}
	if c.Status != want {
		e.t.Fatalf("Claim: status %s, want %s (%+v)", c.Status, want, c)
	}
	if want == dedupe.Claimed && c.Token == "" {
		e.t.Fatalf("Claim: claimed without a token")
	}
	return c
}

func (e *env) notOwner(what string, err error) {
	e.t.Helper()
	if !errors.Is(err, dedupe.ErrNotOwner) {
		e.t.Fatalf("%s by a stale owner: %v, want ErrNotOwner", what, err)
	}
}

// Run runs the conformance suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	t.Run("FirstClaimWins", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, dedupe.Claimed)
		if want := e.clock.Now().Add(lease); !c.LeaseUntil.Equal(want) {
			t.Errorf("LeaseUntil = %v, want %v", c.LeaseUntil, want)
		}
		e.claim(fp, dedupe.InProgress)
	})

	t.Run("RaceOneKey", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		const n = 50
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			statuses = map[dedupe.Status]int{}
			errs     []error
		)
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				<-start
				c, err := e.store.Claim(e.ctx, e.key, fp, lease)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				statuses[c.Status]++
			})
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d claims failed, first: %v", len(errs), errs[0])
		}
		if statuses[dedupe.Claimed] != 1 || statuses[dedupe.InProgress] != n-1 {
			t.Fatalf("racing claims: %v, want exactly 1 claimed and %d in progress", statuses, n-1)
		}
	})

	t.Run("DuplicateAfterComplete", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, dedupe.Claimed)
		if err := e.store.Complete(e.ctx, e.key, c.Token); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		e.claim(fp, dedupe.Duplicate)
		// Still a duplicate long after any lease.
		e.clock.Advance(24 * time.Hour)
		e.claim(fp, dedupe.Duplicate)
		// A completed record cannot be released or completed again.
		e.notOwner("Release after Complete", e.store.Release(e.ctx, e.key, c.Token))
		e.notOwner("Extend after Complete", e.store.Extend(e.ctx, e.key, c.Token, lease))
		e.claim(fp, dedupe.Duplicate)
	})

	t.Run("InProgressBeforeLeaseEnds", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		first := e.claim(fp, dedupe.Claimed)
		e.clock.Advance(lease - time.Second)
		c := e.claim(fp, dedupe.InProgress)
		if !c.LeaseUntil.Equal(first.LeaseUntil) {
			t.Errorf("InProgress LeaseUntil = %v, want the owner's %v", c.LeaseUntil, first.LeaseUntil)
		}
		if c.Token != "" {
			t.Errorf("InProgress leaked the owner's token")
		}
	})

	t.Run("ExtendKeepsLease", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, dedupe.Claimed)
		for range 3 {
			e.clock.Advance(lease - 5*time.Second)
			if err := e.store.Extend(e.ctx, e.key, c.Token, lease); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			got := e.claim(fp, dedupe.InProgress)
			if want := e.clock.Now().Add(lease); !got.LeaseUntil.Equal(want) {
				t.Fatalf("after Extend LeaseUntil = %v, want %v", got.LeaseUntil, want)
			}
		}
		if err := e.store.Complete(e.ctx, e.key, c.Token); err != nil {
			t.Fatalf("Complete after extends: %v", err)
		}
		e.claim(fp, dedupe.Duplicate)
	})

	t.Run("TakeoverAfterLeaseEnds", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		old := e.claim(fp, dedupe.Claimed)
		e.clock.Advance(lease + time.Second)
		cur := e.claim(fp, dedupe.Claimed)
		if cur.Token == old.Token {
			t.Fatalf("takeover reused the old token")
		}
		// The stale owner can touch nothing.
		e.notOwner("Extend", e.store.Extend(e.ctx, e.key, old.Token, lease))
		e.notOwner("Complete", e.store.Complete(e.ctx, e.key, old.Token))
		e.notOwner("Release", e.store.Release(e.ctx, e.key, old.Token))
		// The new owner still holds the key, then completes it.
		e.claim(fp, dedupe.InProgress)
		if err := e.store.Extend(e.ctx, e.key, cur.Token, lease); err != nil {
			t.Fatalf("new owner's Extend: %v", err)
		}
		if err := e.store.Complete(e.ctx, e.key, cur.Token); err != nil {
			t.Fatalf("new owner's Complete: %v", err)
		}
		e.notOwner("Complete after the new owner completed", e.store.Complete(e.ctx, e.key, old.Token))
		e.claim(fp, dedupe.Duplicate)
	})

	t.Run("ReleaseLetsNextClaimRun", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, dedupe.Claimed)
		if err := e.store.Release(e.ctx, e.key, c.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
		next := e.claim(fp, dedupe.Claimed) // no waiting for the lease
		e.notOwner("Release twice", e.store.Release(e.ctx, e.key, c.Token))
		e.notOwner("Complete after Release", e.store.Complete(e.ctx, e.key, c.Token))
		if err := e.store.Complete(e.ctx, e.key, next.Token); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		e.claim(fp, dedupe.Duplicate)
	})

	t.Run("UnknownToken", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		e.notOwner("Extend of an absent key", e.store.Extend(e.ctx, e.key, "nope", lease))
		e.notOwner("Complete of an absent key", e.store.Complete(e.ctx, e.key, "nope"))
		e.notOwner("Release of an absent key", e.store.Release(e.ctx, e.key, "nope"))
		e.claim(fp, dedupe.Claimed)
		e.notOwner("Complete with a wrong token", e.store.Complete(e.ctx, e.key, "nope"))
		e.claim(fp, dedupe.InProgress)
	})

	t.Run("ExpiryAllowsNewClaim", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, dedupe.Claimed)
		if err := e.store.Complete(e.ctx, e.key, c.Token); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		e.clock.Advance(farFuture)
		// Expired, even if the item is still there (TTL deletion lags):
		// a new body may use the key too.
		e.claim(fpB, dedupe.Claimed)
	})

	t.Run("FingerprintMismatch", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, dedupe.Claimed)
		got := e.claim(fpB, dedupe.KeyReused)
		if got.Fingerprint != fp {
			t.Errorf("KeyReused Fingerprint = %q, want the stored %q", got.Fingerprint, fp)
		}
		if err := e.store.Complete(e.ctx, e.key, c.Token); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		e.claim(fpB, dedupe.KeyReused)
		e.claim(fp, dedupe.Duplicate)
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		e.claim(fp, dedupe.Claimed)
		other := *e
		other.key = e.key + "-other"
		other.claim(fpB, dedupe.Claimed)
	})

	t.Run("LongKey", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		long := make([]byte, 3*leasekey.MaxKeyBytes)
		for i := range long {
			long[i] = 'k'
		}
		e.key += string(long)
		c := e.claim(fp, dedupe.Claimed)
		if err := e.store.Complete(e.ctx, e.key, c.Token); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		e.claim(fp, dedupe.Duplicate)
	})
}
