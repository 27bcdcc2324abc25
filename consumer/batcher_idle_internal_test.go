package consumer

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestBatcherSendsOnNudge: ops queued before the count of unsettled
// messages reaches zero go out in one batch at once when the last one's
// nudge comes, not after the flush interval (an hour here).
func TestBatcherSendsOnNudge(t *testing.T) {
	t.Parallel()
	f, s, settle, resolved := idleBatcher(3)
	defer s.close()
	for i := range 3 {
		settle(i)
	}
	wantOneBatch(t, f, resolved, 3)
}

// TestBatcherIdleRace: the ops of one FIFO receive, queued by several
// workers at once, each lowering the count of unsettled messages only
// after its op is queued, go out in one delete call. Two calls would
// unlock the receive's groups in two parts, so that the next receives
// come back short, one after another.
func TestBatcherIdleRace(t *testing.T) {
	t.Parallel()
	for range 200 {
		const n = 9
		f, s, settle, resolved := idleBatcher(n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { settle(i) })
		}
		wg.Wait()
		wantOneBatch(t, f, resolved, n)
		s.close()
	}
}

// idleBatcher runs a batcher for a FIFO receive of n messages, idle once
// none is unsettled, with an hour's flush interval. settle(i) does what
// the runner does for message i: queue its delete, then count it as
// settled, nudging the batcher when it was the last.
func idleBatcher(n int64) (f *nopSettleSQS, s *batcher, settle func(i int), resolved *atomic.Int64) {
	f = &nopSettleSQS{}
	s = newBatcher(f, "https://sqs.test/123456789012/q.fifo", time.Hour, 8, zap.NewNop())
	var unsettled atomic.Int64
	unsettled.Store(n)
	resolved = new(atomic.Int64)
	s.idle = func() bool { return unsettled.Load() == 0 }
	go s.run()
	msg := &Message{ID: "m"}
	settle = func(i int) {
		s.delete("h-"+strconv.Itoa(i), msg, func() { resolved.Add(1) })
		if unsettled.Add(-1) == 0 {
			s.nudge()
		}
	}
	return f, s, settle, resolved
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
