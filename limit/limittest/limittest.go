// Package limittest is the conformance suite every [limit.Store] passes.
//
//	func TestConformance(t *testing.T) {
//		limittest.Run(t, func(t *testing.T, now func() time.Time) limit.Store {
//			return mystore.New(mystore.Config{Client: client, NowFunc: now})
//		})
//	}
//
// The suite controls time in most cases: the store must read the clock
// only through the now function it is given. Two stores that newStore
// returns for one test must share their state (one table, one database),
// as two workers' stores do; the names and keys are unique per test.
package limittest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/internal/leasetest"
	"github.com/sqsonce/sqsonce/limit"
)

// NewStore returns a store whose clock is now. Two calls for one test
// return stores that share their state.
type NewStore func(t *testing.T, now func() time.Time) limit.Store

// Clock is a manual clock, safe for concurrent use.
type Clock = leasetest.Clock

// Name returns a unique limit name for one test.
func Name(prefix string) string { return leasetest.Key(prefix) }

// ttl is the slots' TTL in every case.
const ttl = 30 * time.Second

// every is the rate cases' slot interval: 100 starts a second.
const every = 10 * time.Millisecond

// Run runs the conformance suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	setup := func(t *testing.T) (context.Context, *Clock, limit.Store, string) {
		t.Parallel()
		c := leasetest.NewClock(time.Now().Truncate(time.Millisecond))
		return context.Background(), c, newStore(t, c.Now), Name("conformance")
	}
	req := func(n int) limit.RateRequest {
		return limit.RateRequest{Every: every, N: n, Burst: 2 * every, Ahead: time.Second}
	}

	t.Run("RateBlocks", func(t *testing.T) {
		// A new timeline starts Burst before now; each block starts where
		// the last ended.
		_, clock, s, name := setup(t)
		now := clock.Now()
		l := reserve(t, s, name, req(10))
		wantLease(t, l, now.Add(-2*every), 10)
		clock.Advance(5 * time.Millisecond)
		l2 := reserve(t, s, name, req(5))
		wantLease(t, l2, l.Next, 5)
		if !l2.Next.Equal(l.Next.Add(5 * every)) {
			t.Errorf("Next = %v, want %v", l2.Next, l.Next.Add(5*every))
		}
		// Another name is another timeline.
		l3 := reserve(t, s, name+"-other", req(1))
		wantLease(t, l3, clock.Now().Add(-2*every), 1)
	})

	t.Run("RateAhead", func(t *testing.T) {
		// Past now + Ahead nothing is leased, and Next says when the
		// timeline ends; once the clock reaches it minus Ahead, it is.
		_, clock, s, name := setup(t)
		for range 11 { // 11 blocks of 100 ms: the last starts 0.98 s ahead
			reserve(t, s, name, req(10))
		}
		l := reserve(t, s, name, req(10))
		if l.N != 0 {
			t.Fatalf("a block starting %v ahead, past Ahead (1s): leased %d", l.From.Sub(clock.Now()), l.N)
		}
		end := clock.Now().Add(-2 * every).Add(110 * every)
		if !l.Next.Equal(end) {
			t.Fatalf("Next = %v, want the timeline's end %v", l.Next, end)
		}
		clock.Advance(l.Next.Sub(clock.Now()) - time.Second)
		wantLease(t, reserve(t, s, name, req(10)), end, 10)
	})

	t.Run("RateIdle", func(t *testing.T) {
		// A timeline left idle restarts Burst before now: the slots missed
		// are not made up.
		_, clock, s, name := setup(t)
		reserve(t, s, name, req(10))
		clock.Advance(time.Minute)
		wantLease(t, reserve(t, s, name, req(10)), clock.Now().Add(-2*every), 10)
	})

	t.Run("RateShared", func(t *testing.T) {
		// Two workers' stores, reserving at once: their blocks never
		// overlap and, together, leave no gap.
		ctx, clock, s, name := setup(t)
		s2 := newStore(t, clock.Now)
		var mu sync.Mutex
		var leases []limit.RateLease
		var wg sync.WaitGroup
		for i := range 8 {
			st := s
			if i%2 == 1 {
				st = s2
			}
			wg.Go(func() {
				for range 4 {
					l, err := st.Reserve(ctx, name, limit.RateRequest{Every: every, N: 3, Burst: every, Ahead: time.Hour})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					leases = append(leases, l)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.SortFunc(leases, func(a, b limit.RateLease) int { return a.From.Compare(b.From) })
		if len(leases) != 32 {
			t.Fatalf("%d leases, want 32", len(leases))
		}
		for i, l := range leases {
			if l.N != 3 {
				t.Fatalf("lease %d: %d slots, want 3", i, l.N)
			}
			if i > 0 && !l.From.Equal(leases[i-1].From.Add(3*every)) {
				t.Fatalf("lease %d starts at %v, want %v (the end of the one before): blocks overlap or leave a gap",
					i, l.From.Sub(leases[0].From), leases[i-1].From.Add(3*every).Sub(leases[0].From))
			}
		}
	})

	t.Run("RateRefusesBadRequests", func(t *testing.T) {
		ctx, _, s, name := setup(t)
		for _, r := range []limit.RateRequest{{Every: 0, N: 1}, {Every: every, N: 0}, {Every: every, N: 1, Burst: -1}} {
			if _, err := s.Reserve(ctx, name, r); err == nil {
				t.Errorf("Reserve(%+v): no error", r)
			}
		}
	})

	t.Run("SlotsLimit", func(t *testing.T) {
		// limit holders at most; a release frees one; a release of a slot
		// not held is no error.
		ctx, _, s, name := setup(t)
		key := "account-1"
		for i := range 3 {
			acquire(t, s, slot(name, key, i), 3, true)
		}
		acquire(t, s, slot(name, key, 3), 3, false)
		acquire(t, s, slot(name, "account-2", 0), 3, true) // another key
		if err := s.Release(ctx, slot(name, key, 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, slot(name, key, 1)); err != nil {
			t.Fatalf("a second release: %v", err)
		}
		if err := s.Release(ctx, slot(name, "never", 9)); err != nil {
			t.Fatalf("a release of a key never held: %v", err)
		}
		acquire(t, s, slot(name, key, 4), 3, true)
		acquire(t, s, slot(name, key, 5), 3, false)
		// A higher limit lets more in.
		acquire(t, s, slot(name, key, 6), 4, true)
	})

	t.Run("SlotsExpiry", func(t *testing.T) {
		// A crashed worker's slot frees itself when it expires: another
		// holder takes it, and the crashed one's Extend finds it lost.
		ctx, clock, s, name := setup(t)
		crashed := newStore(t, clock.Now)
		acquire(t, crashed, slot(name, "k", 0), 1, true)
		clock.Advance(ttl - time.Second)
		acquire(t, s, slot(name, "k", 1), 1, false)
		clock.Advance(2 * time.Second)
		acquire(t, s, slot(name, "k", 1), 1, true)
		if err := crashed.Extend(ctx, slot(name, "k", 0), ttl); !errors.Is(err, limit.ErrLost) {
			t.Fatalf("the expired holder's Extend: %v, want ErrLost", err)
		}
		// Its Release does not free the new holder's slot.
		if err := crashed.Release(ctx, slot(name, "k", 0)); err != nil {
			t.Fatal(err)
		}
		acquire(t, s, slot(name, "k", 2), 1, false)
	})

	t.Run("SlotsExtend", func(t *testing.T) {
		// An extended slot is held past its first expiry.
		ctx, clock, s, name := setup(t)
		acquire(t, s, slot(name, "k", 0), 1, true)
		clock.Advance(ttl - 10*time.Second)
		if err := s.Extend(ctx, slot(name, "k", 0), ttl); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		clock.Advance(20 * time.Second) // past the first expiry
		acquire(t, s, slot(name, "k", 1), 1, false)
		clock.Advance(11 * time.Second)
		acquire(t, s, slot(name, "k", 1), 1, true)
		if err := s.Extend(ctx, slot(name, "k", 7), ttl); !errors.Is(err, limit.ErrLost) {
			t.Fatalf("Extend of a slot never held: %v, want ErrLost", err)
		}
		if err := s.Release(ctx, slot(name, "k", 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.Extend(ctx, slot(name, "k", 1), ttl); !errors.Is(err, limit.ErrLost) {
			t.Fatalf("Extend of a released slot: %v, want ErrLost", err)
		}
	})

	t.Run("SlotsAtOnce", func(t *testing.T) {
		// Twelve holders of two workers' stores at once, limit 3: three
		// get a slot.
		ctx, clock, s, name := setup(t)
		s2 := newStore(t, clock.Now)
		var got sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for i := range 12 {
			st := s
			if i%2 == 1 {
				st = s2
			}
			got.Go(func() {
				yes, err := st.Acquire(ctx, slot(name, "hot", i), 3, ttl)
				if err != nil {
					t.Error(err)
				}
				if yes {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			})
		}
		got.Wait()
		if ok != 3 {
			t.Fatalf("%d of 12 holders got a slot at once, want 3 (the limit)", ok)
		}
	})

	t.Run("SlotsLongKey", func(t *testing.T) {
		// Keys are outside text: a key past DynamoDB's key size works, and
		// stays apart from another long key.
		_, _, s, name := setup(t)
		long := strings.Repeat("k", 3*leasekey.MaxKeyBytes)
		acquire(t, s, slot(name, long, 0), 1, true)
		acquire(t, s, slot(name, long, 1), 1, false)
		acquire(t, s, slot(name, long+"x", 0), 1, true)
		acquire(t, s, slot(name, "a#b\x00\"'%", 0), 1, true)
		// Bytes that are not UTF-8 are a key too, apart from others.
		acquire(t, s, slot(name, "\xff\xfe", 0), 1, true)
		acquire(t, s, slot(name, "\xff\xfd", 0), 1, true)
		acquire(t, s, slot(name, "\xff\xfe", 1), 1, false)
	})

	t.Run("SlotsRefuseBadRequests", func(t *testing.T) {
		ctx, _, s, name := setup(t)
		if _, err := s.Acquire(ctx, slot(name, "k", 0), 0, ttl); err == nil {
			t.Error("limit 0: no error")
		}
		if _, err := s.Acquire(ctx, limit.Slot{Name: name, Key: "k"}, 1, ttl); err == nil {
			t.Error("no holder: no error")
		}
	})
}

// RunRate checks [limit.Rate] over stores made by newStore, on the real
// clock: two Rates of one name in two workers share one budget, and lease
// their slots in blocks (one Reserve per block, not per start). It runs
// for about a second.
func RunRate(t *testing.T, newStore NewStore) {
	t.Run("TwoRatesShareOneBudget", func(t *testing.T) {
		t.Parallel()
		name := Name("rate")
		const rate, block, waits = 100.0, 10, 40
		rec := &recorder{}
		var rates [2]*limit.Rate
		for i := range rates {
			r, err := limit.NewRate(limit.RateConfig{Store: rec.wrap(i, newStore(t, time.Now)), Name: name, Rate: rate, Block: block})
			if err != nil {
				t.Fatal(err)
			}
			rates[i] = r
		}
		ctx := context.Background()
		start := time.Now()
		var wg sync.WaitGroup
		var done [2][]time.Time
		for i, r := range rates {
			for range 4 { // four goroutines a worker
				wg.Go(func() {
					for range waits / 8 {
						if err := r.Wait(ctx); err != nil {
							t.Error(err)
							return
						}
						rec.mu.Lock()
						done[i] = append(done[i], time.Now())
						rec.mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		elapsed := time.Since(start)

		rec.mu.Lock()
		defer rec.mu.Unlock()
		// The slots leased, by worker: never overlapping.
		var all []limit.RateLease
		for i := range rec.leases {
			all = append(all, rec.leases[i]...)
		}
		slices.SortFunc(all, func(a, b limit.RateLease) int { return a.From.Compare(b.From) })
		for i := 1; i < len(all); i++ {
			if end := all[i-1].From.Add(time.Duration(all[i-1].N) * (time.Second / rate)); all[i].From.Before(end) {
				t.Fatalf("two workers' blocks overlap: one ends at %v, the next starts at %v", end, all[i].From)
			}
		}
		for i := range done {
			if len(done[i]) != waits/2 {
				t.Fatalf("worker %d: %d waits returned, want %d", i, len(done[i]), waits/2)
			}
			leased := 0
			for _, l := range rec.leases[i] {
				leased += l.N
			}
			if leased < len(done[i]) {
				t.Fatalf("worker %d: %d starts on %d slots leased", i, len(done[i]), leased)
			}
			// Blocks, not a write per start: the calls that leased slots, and
			// at most a few that found the timeline leased far enough.
			if calls := rec.calls[i]; calls > len(done[i])/block+3 {
				t.Errorf("worker %d: %d Reserve calls for %d starts in blocks of %d", i, calls, len(done[i]), block)
			}
		}
		// Together at the rate: 40 starts at 100/s take at least 0.39 s
		// (one slot of Burst before the first).
		if min := time.Duration(waits-2) * time.Second / rate; elapsed < min {
			t.Errorf("%d starts in %v, faster than the rate allows (%v)", waits, elapsed, min)
		}
		t.Logf("%d starts in %v by two workers; Reserve calls %v", waits, elapsed, rec.calls)
	})
}

// recorder records the leases each worker's store handed out.
type recorder struct {
	mu     sync.Mutex
	leases [2][]limit.RateLease
	calls  [2]int
}

type recorded struct {
	limit.Store
	r *recorder
	i int
}

func (r *recorder) wrap(i int, s limit.Store) limit.Store { return recorded{s, r, i} }

func (s recorded) Reserve(ctx context.Context, name string, req limit.RateRequest) (limit.RateLease, error) {
	l, err := s.Store.Reserve(ctx, name, req)
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.calls[s.i]++
	if err == nil && l.N > 0 {
		s.r.leases[s.i] = append(s.r.leases[s.i], l)
	}
	return l, err
}

func slot(name, key string, holder int) limit.Slot {
	return limit.Slot{Name: name, Key: key, Holder: fmt.Sprintf("holder-%d", holder)}
}

func reserve(t *testing.T, s limit.Store, name string, req limit.RateRequest) limit.RateLease {
	t.Helper()
	l, err := s.Reserve(context.Background(), name, req)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return l
}

func wantLease(t *testing.T, l limit.RateLease, from time.Time, n int) {
	t.Helper()
	if l.N != n || !l.From.Equal(from) {
		t.Fatalf("leased %d slots from %v, want %d from %v", l.N, l.From, n, from)
	}
	if want := from.Add(time.Duration(n) * every); !l.Next.Equal(want) {
		t.Fatalf("Next = %v, want %v", l.Next, want)
	}
}

func acquire(t *testing.T, s limit.Store, sl limit.Slot, limitN int, want bool) {
	t.Helper()
	ok, err := s.Acquire(context.Background(), sl, limitN, ttl)
	if err != nil {
		t.Fatalf("Acquire(%s, %s): %v", shorten(sl.Key), sl.Holder, err)
	}
	if ok != want {
		t.Fatalf("Acquire(%s, %s, limit %d) = %v, want %v", shorten(sl.Key), sl.Holder, limitN, ok, want)
	}
}

func shorten(s string) string {
	if len(s) > 20 {
		return fmt.Sprintf("%q… (%d bytes)", s[:20], len(s))
	}
	return fmt.Sprintf("%q", s)
}
