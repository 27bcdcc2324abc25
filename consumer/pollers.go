package consumer

import (
	"context"
	"sync"
	"time"
)

// pollers bounds how many receive calls run at once when Receivers is
// left at its default: between one and every receiver, one more after a
// receive that came back full (the queue has a backlog: another call at
// once finds messages too), one fewer after one that came back with fewer
// than it asked for (the queue had no more for it: receivers polling at
// once only split what arrives, each call a request, and on a FIFO queue
// they share the few unlocked groups). An idle queue is long-polled by one
// receiver; a backlog brings the others back within a few receives.
//
// A call in flight for longer than its long poll plus a second (a
// response the network lost, which the call's own timeout ends later)
// stops counting, so that it cannot hold the only turn.
type pollers struct {
	mu     sync.Mutex
	active int // calls in flight that count
	limit  int // calls allowed at once
	most   int // every receiver
	wake   chan struct{}
	// overdue is how long a call counts: the long poll plus a margin.
	overdue time.Duration
}

func newPollers(receivers int, wait time.Duration) *pollers {
	return &pollers{limit: receivers, most: receivers, wake: make(chan struct{}, 1), overdue: wait + time.Second}
}

// turn is one receive call's place among the pollers.
type turn struct {
	p     *pollers
	once  sync.Once
	timer *time.Timer
}

// acquire waits for a turn to call ReceiveMessage; false when ctx is done.
// A nil pollers (Receivers set by the user) always gives one at once.
func (p *pollers) acquire(ctx context.Context) (*turn, bool) {
	if p == nil {
		return nil, ctx.Err() == nil
	}
	for {
		p.mu.Lock()
		if p.active < p.limit {
			p.active++
			room := p.active < p.limit
			p.mu.Unlock()
			if room {
				p.signal()
			}
			return &turn{p: p}, true
		}
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// calling is called as the turn's receive call starts: from then on it
// counts for the long poll plus a second at most. (Before, the receiver
// may wait for free slots: holding its turn then keeps the others from
// polling for slots it would need.)
func (t *turn) calling() {
	if t != nil {
		t.timer = time.AfterFunc(t.p.overdue, func() { t.end(-1, 0) })
	}
}

// done ends the turn of a call that asked for asked messages and got got,
// and adjusts the limit; -1 for either (the call failed, or never
// started) leaves it.
func (t *turn) done(asked, got int) {
	if t == nil {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.end(asked, got)
}

func (t *turn) end(asked, got int) {
	t.once.Do(func() {
		p := t.p
		p.mu.Lock()
		p.active--
		switch {
		case asked < 0 || got < 0:
		case got >= asked:
			p.limit = min(p.limit+1, p.most)
		default:
			p.limit = max(p.limit-1, 1)
		}
		room := p.active < p.limit
		p.mu.Unlock()
		if room {
			p.signal()
		}
	})
}

func (p *pollers) signal() { wakeOne(p.wake) }
