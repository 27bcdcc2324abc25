package limit_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/limit"
	"github.com/sqsonce/sqsonce/limit/limittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memoryStores returns a NewStore whose stores for one test are one Memory.
func memoryStores() limittest.NewStore {
	var mu sync.Mutex
	stores := map[*testing.T]*limit.Memory{}
	return func(t *testing.T, now func() time.Time) limit.Store {
		mu.Lock()
		defer mu.Unlock()
		if m, ok := stores[t]; ok {
			return m
		}
		m := limit.NewMemory(limit.MemoryConfig{NowFunc: now})
		stores[t] = m
		return m
	}
}

func TestMemoryConformance(t *testing.T) {
	limittest.Run(t, memoryStores())
	limittest.RunRate(t, memoryStores())
}

// TestRateOverAWindow: three Rates of one name (three workers) with
// twenty goroutines each waiting for starts, for a minute: in every
// second the fleet starts at most the rate (and one slot of Burst), and
// over the minute it starts the rate, less at most a block.
func TestRateOverAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limit.NewMemory(limit.MemoryConfig{})
		const rate = 200
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var starts []time.Time
		reserves := 0
		counted := countingStore{Store: store, n: &reserves, mu: &mu}
		var wg sync.WaitGroup
		for range 3 {
			r, err := limit.NewRate(limit.RateConfig{Store: counted, Name: "partner", Rate: rate})
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				wg.Go(func() {
					for r.Wait(ctx) == nil {
						mu.Lock()
						starts = append(starts, time.Now())
						mu.Unlock()
						time.Sleep(7 * time.Millisecond) // the handler
					}
				})
			}
		}
		begin := time.Now()
		time.Sleep(time.Minute)
		cancel()
		wg.Wait()

		perSecond := make([]int, 61)
		for _, at := range starts {
			perSecond[int(at.Sub(begin)/time.Second)]++
		}
		for s, n := range perSecond[:60] {
			if n > rate+1 {
				t.Errorf("second %d: %d starts, above the rate (%d)", s, n, rate)
			}
		}
		inMinute := len(starts) - perSecond[60]
		if inMinute < 60*rate-rate/10 || inMinute > 60*rate+1 {
			t.Errorf("%d starts in the minute, want %d (less at most a block)", inMinute, 60*rate)
		}
		// A block per Reserve; with sixty goroutines waiting for twenty
		// slots a second, the workers also reach Ahead (250 ms) and are
		// refused about once a block.
		if max := 2*inMinute/(rate/10) + 3*10; reserves > max {
			t.Errorf("%d Reserve calls for %d starts in blocks of %d: want at most %d", reserves, inMinute, rate/10, max)
		}
		t.Logf("%d starts in 60 s (%.3f of the rate), %d Reserve calls", inMinute, float64(inMinute)/(60*rate), reserves)
	})
}

// TestRateDropsStaleSlots: slots leased and not spent in time are not
// spent later in a burst.
func TestRateDropsStaleSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := limit.NewRate(limit.RateConfig{Store: limit.NewMemory(limit.MemoryConfig{}), Name: "r", Rate: 10, Block: 10})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := r.Wait(ctx); err != nil { // leases 10 slots, spends the first
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // the other 9 go stale
		begin := time.Now()
		for range 5 {
			if err := r.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// 5 starts at 10/s: 0.4 s at least after the first (a slot of
		// Burst may come at once).
		if d := time.Since(begin); d < 300*time.Millisecond {
			t.Fatalf("5 starts after an idle spell in %v: stale slots were spent in a burst", d)
		}
	})
}

// TestRateWaitsOutAFailingStore: a Reserve that fails is tried again
// after a backoff; no start passes it.
func TestRateWaitsOutAFailingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := limit.NewMemory(limit.MemoryConfig{})
		failing := &flakyStore{Store: mem, failures: 3}
		r, err := limit.NewRate(limit.RateConfig{Store: failing, Name: "r", Rate: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if failing.calls != 4 {
			t.Fatalf("%d Reserve calls, want 3 failed and 1 that leased", failing.calls)
		}
		ctx, cancel := context.WithCancel(context.Background())
		failing.failures = 1 << 30
		go func() { time.Sleep(time.Minute); cancel() }()
		for {
			if err := r.Wait(ctx); err != nil {
				break // the slots leased are spent, then the store fails until ctx ends
			}
		}
	})
}

func TestSlots(t *testing.T) {
	ctx := context.Background()
	mem := limit.NewMemory(limit.MemoryConfig{})
	a, err := limit.NewSlots(limit.SlotsConfig{Store: mem, Name: "accounts"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := limit.NewSlots(limit.SlotsConfig{Store: mem, Name: "accounts"})
	s1, ok, err := a.Acquire(ctx, "acct", 2)
	if err != nil || !ok {
		t.Fatalf("first: %v %v", ok, err)
	}
	if _, ok, _ := b.Acquire(ctx, "acct", 2); !ok {
		t.Fatal("second (another process): refused")
	}
	if _, ok, _ := a.Acquire(ctx, "acct", 2); ok {
		t.Fatal("third: taken past the limit of 2")
	}
	if lost, err := a.Extend(ctx); err != nil || len(lost) != 0 || a.Held() != 1 {
		t.Fatalf("Extend: lost %v, %v, held %d", lost, err, a.Held())
	}
	if err := a.Release(ctx, s1); err != nil || a.Held() != 0 {
		t.Fatal(err)
	}
	if _, ok, _ := a.Acquire(ctx, "acct", 2); !ok {
		t.Fatal("after a release: refused")
	}
}

type countingStore struct {
	limit.Store
	mu *sync.Mutex
	n  *int
}

func (c countingStore) Reserve(ctx context.Context, name string, req limit.RateRequest) (limit.RateLease, error) {
	c.mu.Lock()
	*c.n++
	c.mu.Unlock()
	return c.Store.Reserve(ctx, name, req)
}

type flakyStore struct {
	limit.Store
	mu       sync.Mutex
	failures int
	calls    int
}

func (f *flakyStore) Reserve(ctx context.Context, name string, req limit.RateRequest) (limit.RateLease, error) {
	f.mu.Lock()
	f.calls++
	fail := f.failures > 0
	if fail {
		f.failures--
	}
	f.mu.Unlock()
	if fail {
		return limit.RateLease{}, context.DeadlineExceeded
	}
	return f.Store.Reserve(ctx, name, req)
}
