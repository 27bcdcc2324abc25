package consumer

import (
	"testing"
	"time"
)

func TestAheadFromPace(t *testing.T) {
	for _, tc := range []struct {
		name             string
		handler, latency time.Duration
		concurrency, max int
		empty            bool
		want             int
	}{
		{"fast handlers, slow receives", 20 * time.Millisecond, 5 * time.Millisecond, 100, 200, false, 50}, // 2 × 5,000/s × 5 ms
		{"capped", 20 * time.Millisecond, 50 * time.Millisecond, 100, 200, false, 200},                     // 500 wanted
		{"slow handlers", time.Second, 5 * time.Millisecond, 10, 20, false, 0},                             // 2 × 10/s × 5 ms < 1
		{"just one", 100 * time.Millisecond, 5 * time.Millisecond, 10, 20, false, 10},                      // 1 → a batch of 10
		{"empty queue", 20 * time.Millisecond, 5 * time.Millisecond, 100, 200, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pace
			p.handled(tc.handler)
			if tc.empty {
				p.received(0, time.Millisecond)
			} else {
				p.received(10, tc.latency)
			}
			if got := p.ahead(tc.concurrency, tc.max); got != tc.want {
				t.Errorf("ahead = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestWaitedReceiveIsNotLatency: a receive that waited in the long poll
// (the queue was empty) turns receive-ahead off rather than counting as
// a 20 s latency.
func TestWaitedReceiveIsNotLatency(t *testing.T) {
	var p pace
	p.handled(20 * time.Millisecond)
	p.received(1, 15*time.Second)
	if got := p.ahead(100, 200); got != 0 {
		t.Errorf("ahead after a long-poll wait = %d, want 0", got)
	}
}
