package consumer

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestSettlerSendsOnNudge: ops queued before the count of unsettled
// messages reaches zero go out in one batch at once when the last one's
// nudge comes, not after the flush interval (an hour here). The runner
// lowers the count only after an op is queued, so the settler can take the
// last op while the count is still one: without the nudge that batch would
// wait out the interval.
func TestSettlerSendsOnNudge(t *testing.T) {
	t.Parallel()
	f := &nopSettleSQS{}
	s := newSettler(f, "https://sqs.test/123456789012/q.fifo", time.Hour, 8, zap.NewNop())
	const n = 3
	var unsettled, resolved atomic.Int64
	unsettled.Store(n)
	s.idle = func() bool { return unsettled.Load() == 0 }
	go s.run()
	defer s.close()
	msg := &Message{ID: "m"}
	for i := range n {
		s.delete("h-"+strconv.Itoa(i), msg, func() { resolved.Add(1) })
		time.Sleep(10 * time.Millisecond) // the settler takes the op before the count drops
		if unsettled.Add(-1) == 0 {
			s.nudge()
		}
	}
	wantOneBatch(t, f, &resolved, n)
}

// TestSettlerIdleRace: the last op can be queued, and the count of
// unsettled messages reach zero, while the settler looks at both. Asked
// whether s.ops is empty first and the count second, it would send the ops
// it holds and then the last one alone: two delete calls for one FIFO
// receive, whose groups then unlock in two parts, so that the next
// receives come back short, one after another. Here the last op is queued
// from inside idle, the moment the settler asks.
func TestSettlerIdleRace(t *testing.T) {
	t.Parallel()
	f := &nopSettleSQS{}
	s := newSettler(f, "https://sqs.test/123456789012/q.fifo", time.Hour, 8, zap.NewNop())
	const n = 3
	var resolved atomic.Int64
	done := func() { resolved.Add(1) }
	msg := &Message{ID: "m"}
	for i := range n - 1 {
		s.delete("h-"+strconv.Itoa(i), msg, done)
	}
	// The first time the settler asks, the last op is queued and the
	// count of unsettled messages drops to zero.
	var last sync.Once
	s.idle = func() bool {
		last.Do(func() { s.delete("h-last", msg, done) })
		return true
	}
	go s.run()
	defer s.close()
	wantOneBatch(t, f, &resolved, n)
}

// wantOneBatch waits up to 5 s for n deletes to be resolved (an hour's
// flush interval never passes meanwhile) and wants them sent in one call.
func wantOneBatch(t *testing.T, f *nopSettleSQS, resolved *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for resolved.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := resolved.Load(); got != n {
		t.Fatalf("%d of %d deletes sent within 5 s: want them sent at once", got, n)
	}
	if c := f.calls.Load(); c != 1 {
		t.Errorf("%d delete calls for %d ops, want one batch", c, n)
	}
}
