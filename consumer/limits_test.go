package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/limit"
)

// keyed is the limits tests' handler: each body is "KEY-N"; it records
// every start, and per key how many ran at once (the most), and takes
// hold to run (or waits on gate when set).
type keyed struct {
	hold time.Duration
	gate chan struct{} // when set, a run waits until it is closed

	mu      sync.Mutex
	runs    map[string]int
	now     map[string]int
	most    map[string]int
	starts  []time.Time
	byKey   map[string][]time.Time
	running int
}

func newKeyed(hold time.Duration) *keyed {
	return &keyed{hold: hold, runs: map[string]int{}, now: map[string]int{}, most: map[string]int{}, byKey: map[string][]time.Time{}}
}

func keyOf(body string) string { k, _, _ := strings.Cut(body, "-"); return k }

func (k *keyed) handle(ctx context.Context, m *consumer.Message) error {
	key := keyOf(m.Body)
	k.mu.Lock()
	k.runs[m.Body]++
	k.now[key]++
	k.most[key] = max(k.most[key], k.now[key])
	k.starts = append(k.starts, time.Now())
	k.byKey[key] = append(k.byKey[key], time.Now())
	k.running++
	k.mu.Unlock()
	if k.gate != nil {
		<-k.gate
	}
	time.Sleep(k.hold)
	k.mu.Lock()
	k.now[key]--
	k.running--
	k.mu.Unlock()
	return nil
}

// once fails the test unless every body ran exactly once.
func (k *keyed) once(t *testing.T, bodies []string) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range bodies {
		if k.runs[b] != 1 {
			t.Errorf("%s ran %d times, want once", b, k.runs[b])
		}
	}
}

// perSecond counts the starts in each second from begin.
func (k *keyed) perSecond(begin time.Time) []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []int
	for _, at := range k.starts {
		s := int(at.Sub(begin) / time.Second)
		for len(out) <= s {
			out = append(out, 0)
		}
		out[s]++
	}
	return out
}

// noRelease fails the test on any visibility change to 0 (a release) and
// on any message received more than once.
func noRelease(t *testing.T, f *sqsfake.Fake, q string, bodies []string, received map[string]int) {
	t.Helper()
	for _, c := range f.VisibilityLog() {
		if c.Seconds == 0 {
			t.Errorf("a visibility change to 0 (a release) of %s", c.MessageID)
		}
	}
	for _, b := range bodies {
		if received[b] > 1 {
			t.Errorf("%s received %d times: it was released or its visibility lapsed", b, received[b])
		}
	}
}

// countCalls counts f's ReceiveMessage calls.
func countCalls(f *sqsfake.Fake) (calls func() int) {
	var mu sync.Mutex
	n := 0
	f.Inject(func(op string, in any) sqsfake.Fault {
		if op == "ReceiveMessage" {
			mu.Lock()
			n++
			mu.Unlock()
		}
		return sqsfake.Fault{}
	})
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// countReceives counts, by body, how often each message of q was
// received so far (its ApproximateReceiveCount, or 0 once deleted).
func countReceives(f *sqsfake.Fake, q string, into map[string]int) {
	for _, m := range f.Messages(q) {
		into[m.Body] = max(into[m.Body], m.ReceiveCount)
	}
}

func put(f *sqsfake.Fake, q string, key string, n int) []string {
	var bodies []string
	for i := range n {
		b := fmt.Sprintf("%s-%02d", key, i)
		f.Put(q, b, "")
		bodies = append(bodies, b)
	}
	return bodies
}

func accountLimit(n int) func(m *consumer.Message) (string, int) {
	return func(m *consumer.Message) (string, int) { return keyOf(m.Body), n }
}

// TestKeyLimitHoldsWithoutReleasing: thirty messages of one hot key, with
// a limit of one at once, and ten of other keys sent after them. The hot
// key's run one at a time, taking half a minute in all, past the 30 s
// visibility timeout: the held ones wait invisible under the heartbeat,
// never released or received again, and (MaxHeld leaving room for them
// all) the other keys' are received and run meanwhile, not behind them.
func TestKeyLimitHoldsWithoutReleasing(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, dlq := onFake(fifo, map[string]string{"VisibilityTimeout": "30"}, nil)
				var bodies []string
				for i := range 30 {
					b := fmt.Sprintf("hot-%02d", i)
					group := ""
					if fifo {
						group = fmt.Sprintf("g%d", i) // each its own group: only the key limit orders them
					}
					f.Put(q, b, group)
					bodies = append(bodies, b)
				}
				for i := range 10 {
					b := fmt.Sprintf("k%d-00", i)
					group := ""
					if fifo {
						group = "o" + b
					}
					f.Put(q, b, group)
					bodies = append(bodies, b)
				}
				h := newKeyed(time.Second)
				received := map[string]int{}
				begin := time.Now()
				stop := startOnFake(t, f, q, consumer.Config{
					Concurrency: 4, Handler: consumer.HandlerFunc(h.handle),
					// Room for every held hot message: the other keys, sent
					// after them, are received while they wait.
					Limits: consumer.Limits{KeyLimitFunc: accountLimit(1), MaxHeld: 30},
				})
				var othersDone time.Duration
				if !waitUntil(5*time.Minute, func() bool {
					countReceives(f, q, received)
					h.mu.Lock()
					others := 0
					for i := range 10 {
						others += h.runs[fmt.Sprintf("k%d-00", i)]
					}
					h.mu.Unlock()
					if others == 10 && othersDone == 0 {
						othersDone = time.Since(begin)
					}
					return len(f.Messages(q)) == 0
				}) {
					t.Errorf("not drained after 5 minutes: %d left", len(f.Messages(q)))
				}
				took := time.Since(begin)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				h.once(t, bodies)
				if h.most["hot"] != 1 {
					t.Errorf("the hot key ran %d at once, want 1 (its limit)", h.most["hot"])
				}
				noRelease(t, f, q, bodies, received)
				if len(f.Sent(dlq)) != 0 {
					t.Errorf("%d dead letters", len(f.Sent(dlq)))
				}
				if othersDone > 10*time.Second || took < 30*time.Second {
					t.Errorf("the other keys done after %v (want within 10 s: not behind the hot key), all after %v (want ≥ 30 s: one hot at a time)", othersDone, took)
				}
				t.Logf("other keys done after %v, all after %v", othersDone, took)
				checkProblems(t, f)
			})
		})
	}
}

// TestKeyLimitSlowsReceivingPastMaxHeld: every message is of one key,
// limited to one at once, whose handler does not return. Up to MaxHeld
// (3) held messages lend their slots to receives; past that, receiving
// stops, rather than releasing: Concurrency+Prefetch (2) + MaxHeld
// messages are in flight and no receive call is made for a minute. Once
// the handler returns, every message runs once.
func TestKeyLimitSlowsReceivingPastMaxHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		bodies := put(f, q, "acct", 20)
		h := newKeyed(0)
		h.gate = make(chan struct{})
		calls := countCalls(f)
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 2, Prefetch: consumer.NoPrefetch, WaitTime: time.Second, Handler: consumer.HandlerFunc(h.handle),
			Limits: consumer.Limits{KeyLimitFunc: accountLimit(1), MaxHeld: 3},
		})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		inFlight := func() int {
			n := 0
			for _, m := range f.Messages(q) {
				if m.State == sqsfake.InFlight {
					n++
				}
			}
			return n
		}
		if got := inFlight(); got != 5 {
			t.Errorf("%d messages in flight, want 5: Concurrency+Prefetch (2) and MaxHeld (3)", got)
		}
		before := calls()
		time.Sleep(time.Minute) // two visibility timeouts
		if after := calls(); after != before {
			t.Errorf("%d receive calls in the minute past MaxHeld, want none", after-before)
		}
		if got := inFlight(); got != 5 {
			t.Errorf("a minute later %d messages in flight, want 5 (held, extended, not released)", got)
		}
		close(h.gate)
		if !waitUntil(time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
			t.Errorf("not drained: %d left", len(f.Messages(q)))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.once(t, bodies)
		if h.most["acct"] != 1 {
			t.Errorf("%d at once, want 1", h.most["acct"])
		}
		noRelease(t, f, q, bodies, nil)
		checkProblems(t, f)
	})
}

// TestRateLimitInProcess: Rate 5 a second, eight workers, a backlog of 60
// no-op messages: in no second do more than 5 start (and the one of
// Burst), none is released, and all run once.
func TestRateLimitInProcess(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, q, _ := onFake(fifo, map[string]string{"VisibilityTimeout": "30"}, nil)
				var bodies []string
				for i := range 60 {
					b := fmt.Sprintf("m-%02d", i)
					f.Put(q, b, fmt.Sprintf("g%d", i%20))
					bodies = append(bodies, b)
				}
				h := newKeyed(0)
				begin := time.Now()
				stop := startOnFake(t, f, q, consumer.Config{
					Concurrency: 8, Handler: consumer.HandlerFunc(h.handle),
					Limits: consumer.Limits{Rate: 5},
				})
				if !waitUntil(time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
					t.Errorf("not drained: %d left", len(f.Messages(q)))
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				h.once(t, bodies)
				per := h.perSecond(begin)
				for s, n := range per {
					if n > 5+1 {
						t.Errorf("second %d: %d starts, above the rate (5) and the burst (1)", s, n)
					}
				}
				if len(per) < 11 {
					t.Errorf("60 starts within %d seconds: faster than 5 a second", len(per))
				}
				noRelease(t, f, q, bodies, nil)
				checkProblems(t, f)
			})
		})
	}
}

// TestFleetLimitsTwoConsumers: two consumers (two workers) of one queue
// share one store: together they start at most 10 messages a second, and
// run at most 2 of a key at once, while each alone could run 8.
func TestFleetLimitsTwoConsumers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		var bodies []string
		for _, k := range []string{"a", "b", "c"} {
			bodies = append(bodies, put(f, q, k, 30)...)
		}
		store := limit.NewMemory(limit.MemoryConfig{})
		h := newKeyed(700 * time.Millisecond)
		begin := time.Now()
		limits := consumer.Limits{Rate: 10, KeyLimitFunc: accountLimit(2), Store: store, Name: "partner"}
		stop1 := startOnFake(t, f, q, consumer.Config{Concurrency: 8, Handler: consumer.HandlerFunc(h.handle), Limits: limits})
		stop2 := startOnFake(t, f, q, consumer.Config{Concurrency: 8, Handler: consumer.HandlerFunc(h.handle), Limits: limits})
		if !waitUntil(2*time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
			t.Errorf("not drained: %d left", len(f.Messages(q)))
		}
		if err := stop1(); err != nil {
			t.Fatal(err)
		}
		if err := stop2(); err != nil {
			t.Fatal(err)
		}
		h.once(t, bodies)
		for _, k := range []string{"a", "b", "c"} {
			if h.most[k] > 2 {
				t.Errorf("key %s ran %d at once across the two workers, want at most 2", k, h.most[k])
			}
		}
		per := h.perSecond(begin)
		for s, n := range per {
			if n > 10+1 {
				t.Errorf("second %d: %d starts by the two workers, above the fleet's rate (10)", s, n)
			}
		}
		noRelease(t, f, q, bodies, nil)
		t.Logf("90 messages in %d s; per second %v", len(per), per)
	})
}

// TestFleetSlotOfACrashedWorkerExpires: a worker that crashed holds the
// only slot of key "acct" in the store; the consumer holds the key's
// messages (not releasing them) until that slot expires, then runs them.
func TestFleetSlotOfACrashedWorkerExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		bodies := put(f, q, "acct", 3)
		store := limit.NewMemory(limit.MemoryConfig{})
		const ttl = 45 * time.Second
		if ok, err := store.Acquire(context.Background(), limit.Slot{Name: "ledger", Key: "acct", Holder: "crashed"}, 1, ttl); !ok || err != nil {
			t.Fatal(ok, err)
		}
		h := newKeyed(0)
		begin := time.Now()
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 4, Handler: consumer.HandlerFunc(h.handle),
			Limits: consumer.Limits{KeyLimitFunc: accountLimit(1), Store: store, Name: "ledger"},
		})
		if !waitUntil(2*time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
			t.Errorf("not drained: %d left", len(f.Messages(q)))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.once(t, bodies)
		if first := h.byKey["acct"][0].Sub(begin); first < ttl {
			t.Errorf("the first message of the key started after %v, before the crashed worker's slot expired (%v)", first, ttl)
		}
		noRelease(t, f, q, bodies, nil)
	})
}

// TestLimitsConfig: a wrong Limits fails New with what to set.
func TestLimitsConfig(t *testing.T) {
	store := limit.NewMemory(limit.MemoryConfig{})
	for _, tc := range []struct {
		limits consumer.Limits
		want   string
	}{
		{consumer.Limits{Rate: -1}, "Limits.Rate"},
		{consumer.Limits{Burst: -1}, "Limits.Burst"},
		{consumer.Limits{Store: store}, "Limits.Store"},
		{consumer.Limits{Adaptive: consumer.Adaptive{On: true}}, "Limits.Adaptive needs a Rate"},
		{consumer.Limits{Rate: 10, Adaptive: consumer.Adaptive{On: true, Decrease: 1.5}}, "Adaptive.Decrease"},
		{consumer.Limits{Rate: 10, Adaptive: consumer.Adaptive{On: true, Min: 20}}, "Adaptive.Min"},
	} {
		_, err := consumer.New(consumer.Config{Client: sqsfake.New(), QueueURL: "q", Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }), Limits: tc.limits})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.limits, err, tc.want)
		}
	}
}

// TestAdaptiveRateFollowsTheDownstream: the downstream takes 10 calls a
// second and answers the rest 429 (RateLimited, Retry-After 1 s); the
// consumer's Rate is 50. With Adaptive on, the consumer lowers its rate
// and the downstream refuses far fewer calls than without; nothing is
// dead-lettered either way, and every message runs to success once.
func TestAdaptiveRateFollowsTheDownstream(t *testing.T) {
	refused := map[bool]int{}
	for _, adaptive := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
			bodies := put(f, q, "m", 300)
			var mu sync.Mutex
			ok := map[string]int{}
			window, inWindow := time.Now(), 0
			handler := func(_ context.Context, m *consumer.Message) error {
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				defer mu.Unlock()
				if now := time.Now(); now.Sub(window) >= time.Second {
					window, inWindow = now, 0
				}
				if inWindow >= 10 {
					refused[adaptive]++
					return consumer.RateLimited(errors.New("429 Too Many Requests"), time.Second)
				}
				inWindow++
				ok[m.Body]++
				return nil
			}
			core, logs := observer.New(zapcore.InfoLevel)
			stop := startOnFake(t, f, q, consumer.Config{
				Concurrency: 8, Handler: consumer.HandlerFunc(handler), Logger: zap.New(core),
				Limits: consumer.Limits{Rate: 50, Adaptive: consumer.Adaptive{On: adaptive}},
			})
			if !waitUntil(10*time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
				t.Errorf("not drained: %d left", len(f.Messages(q)))
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			for _, b := range bodies {
				if ok[b] != 1 {
					t.Errorf("%s succeeded %d times, want once", b, ok[b])
				}
			}
			if len(f.Sent(dlq)) != 0 {
				t.Errorf("%d dead letters", len(f.Sent(dlq)))
			}
			lowered := logs.FilterMessage("consumer: rate lowered: the downstream asked to slow down").Len()
			if adaptive != (lowered > 0) {
				t.Errorf("adaptive=%v: %d lines saying the rate was lowered", adaptive, lowered)
			}
		})
	}
	t.Logf("429s: %d without Adaptive, %d with", refused[false], refused[true])
	if refused[true]*2 > refused[false] {
		t.Errorf("Adaptive: %d calls refused, without it %d: want fewer than half", refused[true], refused[false])
	}
}
