package consumer

import (
	"context"
	"sync"
	"time"
)

// pollers bounds how many receive calls run at once when Receivers is
// left at its default: between one and every receiver. One fewer after a
// receive that came back with fewer messages than it asked for (the queue
// had no more for it: receivers polling at once only split what arrives,
// each call a request, and on a FIFO queue they share the few unlocked
// groups). One more after need receives in a row came back full: a full
// receive says the queue had that many, not that another call at once
// would find more (a producer that sends batches of ten fills every
// receive of a queue one receiver keeps up with), so each added call is a
// probe. Once the added call and those at once with it came back full,
// the probe held and need halves; a receive that came back short first
// means it failed, and need doubles, up to maxNeed. On a FIFO queue only
// an empty receive fails a probe: there a receive comes back short on a
// backlog too, as the groups with messages in flight are locked, so a
// short one refutes nothing; an empty one says the call found no group to
// take (with few groups, every one locked by the messages the other calls
// brought, until their delete unlocks them for one call, and a local
// emulator then ends the other calls' long polls empty). A steady backlog
// thus brings every receiver back within a few receives, while a queue
// one receiver keeps up with is polled by one, with a probe now and then.
// An idle queue is long-polled by one receiver.
//
// A call in flight for longer than its long poll plus a second (a
// response the network lost, which the call's own timeout ends later)
// stops counting, so that it cannot hold the only turn.
type pollers struct {
	mu     sync.Mutex
	active int // calls in flight that count
	limit  int // calls allowed at once
	most   int // every receiver
	// need is how many full receives in a row add a call, at most
	// maxNeed; full counts them; probe is how many more full receives
	// confirm the last call added (0: none is on probation).
	need, full, probe int
	// fifo: only an empty receive fails a probe.
	fifo bool
	wake chan struct{}
	// overdue is how long a call counts: the long poll plus a margin.
	overdue time.Duration
}

// maxNeed bounds pollers.need: after failed probes, a backlog that starts
// still adds a call within this many full receives.
const maxNeed = 16

func newPollers(receivers int, wait time.Duration, fifo bool) *pollers {
	return &pollers{limit: receivers, most: receivers, need: 1, fifo: fifo, wake: make(chan struct{}, 1), overdue: wait + time.Second}
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
			p.grow()
		default:
			p.full = 0
			if p.probe > 0 {
				p.probe = 0
				if !p.fifo || got == 0 {
					p.need = min(p.need*2, maxNeed)
				}
			}
			p.limit = max(p.limit-1, 1)
		}
		room := p.active < p.limit
		p.mu.Unlock()
		if room {
			p.signal()
		}
	})
}

// grow counts a full receive (p.mu held): it confirms the call on
// probation once enough came back full, and adds one after need in a row.
func (p *pollers) grow() {
	if p.probe > 0 {
		if p.probe--; p.probe == 0 {
			p.need = max(p.need/2, 1)
		}
	}
	if p.full++; p.full >= p.need && p.limit < p.most {
		p.limit++
		p.full = 0
		// The new call and the others at once: every one must come back
		// full before a receive comes back short.
		p.probe = p.limit
	}
}

func (p *pollers) signal() { wakeOne(p.wake) }
