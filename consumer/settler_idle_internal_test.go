package consumer

import (
	"strconv"
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
	deadline := time.Now().Add(5 * time.Second)
	for resolved.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := resolved.Load(); got != n {
		t.Fatalf("%d of %d deletes sent 5 s after the last nudge: want them sent at once", got, n)
	}
	if c := f.calls.Load(); c != 1 {
		t.Errorf("%d delete calls for %d ops, want one batch", c, n)
	}
}
