package consumer_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// slowQueue returns a queue on a fake holding n messages with bodies "0",
// "1", … (on a FIFO queue when groups > 0, message i in group i%groups),
// the queue's visibility timeout in seconds, and every call of ops taking
// latency.
func slowQueue(n, groups int, visibility string, latency time.Duration, ops ...string) (*sqsfake.Fake, string) {
	f, q, _ := onFake(groups > 0, map[string]string{"VisibilityTimeout": visibility}, nil)
	for i := range n {
		f.Put(q, fmt.Sprint(i), fmt.Sprintf("g%d", i%max(groups, 1)))
	}
	f.Inject(func(op string, _ any) sqsfake.Fault {
		if slices.Contains(ops, op) {
			return sqsfake.Fault{Delay: latency}
		}
		return sqsfake.Fault{}
	})
	return f, q
}

// throughputOnFake runs n messages through a consumer whose handler takes
// handlerTime, against a fake whose receives and deletes take latency, in
// a synctest bubble (virtual time: CPU costs nothing, so only the
// consumer's scheduling shows), and returns the ratio of the rate between
// 10% and 90% done to the ideal rate (Concurrency ÷ mean handler time),
// and the most messages held at once.
func throughputOnFake(t *testing.T, n, groups int, handlerTime func(i int) time.Duration, latency time.Duration, cfg consumer.Config) (ratio float64, maxHeld int) {
	t.Helper()
	f, q := slowQueue(n, groups, "30", latency, "ReceiveMessage", "DeleteMessageBatch")
	a := &askingSQS{Fake: f, q: q}
	var ideal time.Duration
	for i := range n {
		ideal += handlerTime(i)
	}
	ideal /= time.Duration(cfg.Concurrency)
	var done atomic.Int64
	cfg.Client = a
	cfg.Observer = &recordingObserver{onSettled: func(*consumer.Message, consumer.Result) { a.settled(); done.Add(1) }}
	cfg.Handler = consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		var i int
		fmt.Sscan(m.Body, &i)
		time.Sleep(handlerTime(i))
		return nil
	})
	stop := startOnFake(t, f, q, cfg)
	// The rate between 10% and 90% done: neither the start nor the last
	// long handlers of a heavy tail say anything about the steady state.
	var t10, t90 time.Time
	for done.Load() < int64(n) {
		time.Sleep(time.Millisecond)
		if d := done.Load(); t10.IsZero() && d >= int64(n)/10 {
			t10 = time.Now()
		} else if t90.IsZero() && d >= int64(n)*9/10 {
			t90 = time.Now()
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkProblems(t, f)
	return float64(ideal) * 0.8 / float64(t90.Sub(t10)), a.maxHeld
}

// TestReceiveAheadHidesReceiveLatency: a 20 ms handler at Concurrency 100
// can run 5,000 messages a second; with 5 or 20 ms receives, the workers
// must not wait for them. Without receive-ahead a receive was issued only
// once 10 slots were free, so about latency × rate slots sat empty (0.80
// of the ideal rate at 20 ms). The extra slots stay within the bound
// (2 × Concurrency).
func TestReceiveAheadHidesReceiveLatency(t *testing.T) {
	for _, latency := range []time.Duration{5 * time.Millisecond, 20 * time.Millisecond} {
		t.Run(latency.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ratio, held := throughputOnFake(t, 10000, 0, func(int) time.Duration { return 20 * time.Millisecond }, latency, consumer.Config{Concurrency: 100})
				t.Logf("receive latency %s: %.3f of the ideal rate, %d held at most", latency, ratio, held)
				if ratio < 0.95 {
					t.Errorf("receive latency %s: %.3f of the ideal rate, want ≥ 0.95", latency, ratio)
				}
				if held <= 110 {
					t.Errorf("receive latency %s: %d held at most: nothing received ahead of Concurrency+Prefetch (110)", latency, held)
				}
				if held > 200 {
					t.Errorf("receive latency %s: %d held at most, more than 2 × Concurrency", latency, held)
				}
			})
		})
	}
}

// TestPrefetchSetTurnsReceiveAheadOff: a Prefetch the user sets is fixed,
// however long receives take.
func TestPrefetchSetTurnsReceiveAheadOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, held := throughputOnFake(t, 3000, 0, func(int) time.Duration { return 20 * time.Millisecond }, 20*time.Millisecond, consumer.Config{Concurrency: 100, Prefetch: 10})
		if held > 110 {
			t.Errorf("%d held at most with Prefetch 10, want ≤ 110", held)
		}
	})
}

// heavyTail returns handler times with a median of 5 ms and a p99 of
// about 200 ms (a log-normal, fixed by i so that every run is the same).
func heavyTail(i int) time.Duration {
	// Inverse normal CDF by a rational approximation is overkill here: a
	// lookup over i's position in a fixed permutation gives the quantile.
	q := float64((i*7919)%10000) / 10000 // a quantile in [0,1), spread over i
	// log-normal with median 5 ms and σ so that p99 = 200 ms: σ = ln(40)/2.326.
	return time.Duration(5e6 * math.Exp(1.586*normQuantile(q)))
}

// normQuantile is the standard normal quantile (Acklam's approximation is
// more than precise enough for a test distribution).
func normQuantile(p float64) float64 {
	if p <= 0 {
		p = 1e-4
	}
	// Beasley-Springer-Moro via math.Erfinv.
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// TestReceiveAheadMixedHandlerTimes: heavy-tailed handler times (median
// 5 ms, p99 200 ms) with 5 ms receives keep at least 0.9 of the ideal rate.
func TestReceiveAheadMixedHandlerTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ratio, held := throughputOnFake(t, 20000, 0, heavyTail, 5*time.Millisecond, consumer.Config{Concurrency: 100})
		t.Logf("mixed handler times: %.3f of the ideal rate, %d held at most", ratio, held)
		if ratio < 0.9 {
			t.Errorf("mixed handler times: %.3f of the ideal rate, want ≥ 0.9", ratio)
		}
	})
}

// TestReceiveAheadFIFO: 100 groups, Concurrency 32, 20 ms handlers and
// 5 ms receives and deletes: FIFO slots are held until the delete
// returns, so receive-ahead has to cover the delete too (0.83 without
// it). The handler times vary by up to 0.9 ms: with times all multiples
// of 5 ms, handlers, receives and deletes ended at the same virtual
// instants, and the result followed the scheduler's order among them
// (0.87 to 0.97 under CPU load). With them varied, 6 slots were added to
// a base of 42, which let no receive start earlier (0.83) until slots
// were added in whole batches.
func TestReceiveAheadFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		handlerTime := func(i int) time.Duration { return 20*time.Millisecond + time.Duration(i*7%10)*100*time.Microsecond }
		ratio, held := throughputOnFake(t, 5000, 100, handlerTime, 5*time.Millisecond, consumer.Config{Concurrency: 32})
		t.Logf("FIFO, 100 groups: %.3f of the ideal rate, %d held at most", ratio, held)
		if ratio < 0.9 {
			t.Errorf("FIFO, 100 groups: %.3f of the ideal rate, want ≥ 0.9", ratio)
		}
	})
}

// TestNoReceiveAheadForSlowHandlers: when handlers are slow compared with
// a receive, nothing is received ahead: at most Concurrency+Prefetch held.
func TestNoReceiveAheadForSlowHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, held := throughputOnFake(t, 300, 0, func(int) time.Duration { return time.Second }, 5*time.Millisecond, consumer.Config{Concurrency: 10})
		if held > 20 {
			t.Errorf("%d messages held with 1 s handlers, want at most Concurrency+Prefetch (20)", held)
		}
	})
}

// TestReceiveAheadStopsWhenEmpty: once the queue is empty the extra
// receivers go back to sleep: an idle consumer long-polls with its
// Receivers only.
func TestReceiveAheadStopsWhenEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q := slowQueue(5000, 0, "30", 20*time.Millisecond, "ReceiveMessage")
		var done atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 100,
			Observer:    &recordingObserver{onSettled: func(*consumer.Message, consumer.Result) { done.Add(1) }},
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				time.Sleep(20 * time.Millisecond)
				return nil
			}),
		})
		for done.Load() < 5000 {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Minute) // let receive-ahead see the empty queue
		before := f.Calls("ReceiveMessage")
		time.Sleep(10 * time.Minute)
		polls := f.Calls("ReceiveMessage") - before
		// One receiver long-polls an idle queue, 20 s each (8 Receivers
		// for Concurrency 100 + Prefetch 10, and receive-ahead's, before).
		if want := 30; polls > want+1 {
			t.Errorf("%d receives in 10 idle minutes, want about %d (one receiver polling)", polls, want)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		checkProblems(t, f)
	})
}

// TestReceiveAheadReleasedAtShutdown: messages received ahead wait under
// the heartbeat and are released (visibility 0) when the consumer stops:
// after Run returns every message is deleted or visible again, none
// waits for its visibility timeout, and each ran at most once.
func TestReceiveAheadReleasedAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q := slowQueue(5000, 0, "300", 20*time.Millisecond, "ReceiveMessage")
		obs := &recordingObserver{}
		var ran sync.Map
		var twice atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 100,
			Observer:    obs,
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				if _, again := ran.LoadOrStore(m.Body, true); again {
					twice.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
				return nil
			}),
		})
		time.Sleep(500 * time.Millisecond) // receive-ahead is on by now
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := obs.count(consumer.OutcomeRelease); n <= 10 {
			t.Errorf("%d messages released at shutdown: receive-ahead held no more than the Prefetch", n)
		}
		for _, m := range f.Messages(q) {
			if m.State != sqsfake.Visible {
				t.Fatalf("message %s is %s after Run returned, want visible (released)", m.Body, m.State)
			}
		}
		if n := twice.Load(); n > 0 {
			t.Errorf("%d messages ran twice", n)
		}
		checkProblems(t, f)
	})
}

// TestNoReceiveAheadOnContendedBackend: when a handler's time grows with
// the number of handlers running (a contended backend: 2 ms × running/4,
// so the rate is the same however many run), slots received ahead would
// only hold messages longer. The receives (20 ms) keep every worker busy,
// so receive-ahead must add nothing, although rate × receive latency is
// 40 messages.
func TestNoReceiveAheadOnContendedBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 6000
		f, q := slowQueue(n, 0, "30", 20*time.Millisecond, "ReceiveMessage", "DeleteMessageBatch")
		a := &askingSQS{Fake: f, q: q}
		var done, running atomic.Int64
		cfg := consumer.Config{Concurrency: 100, Client: a}
		cfg.Observer = &recordingObserver{onSettled: func(*consumer.Message, consumer.Result) { a.settled(); done.Add(1) }}
		cfg.Handler = consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
			r := running.Add(1)
			time.Sleep(2 * time.Millisecond * time.Duration(r) / 4)
			running.Add(-1)
			return nil
		})
		stop := startOnFake(t, f, q, cfg)
		for done.Load() < n {
			time.Sleep(time.Millisecond)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		checkProblems(t, f)
		t.Logf("contended backend: %d held at most", a.maxHeld)
		if limit := 100 + 10 + 5; a.maxHeld > limit {
			t.Errorf("%d messages held at most, want ≤ %d (Concurrency+Prefetch, and a few being settled)", a.maxHeld, limit)
		}
	})
}
