package consumer

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// capacity counts free slots for receivers: a slot is a message received
// and not yet settled (on FIFO queues: not yet deleted), or one asked for by
// a receive in flight.
//
// A receiver takes slots only when a full batch (10) is free, or when
// fewer slots are held than there are workers (more than the prefetch
// free), so that a worker would otherwise idle. With a prefetch of 9 or
// more every receive asks for 10 (one receive call per ten messages); with
// none a receiver asks for whatever a free worker can start at once.
//
// Receive-ahead (the default Prefetch) adds slots on top of the prefetch
// when workers wait for receives. Each receive that comes back full (the
// queue has a backlog) measures how long its call took and whether a
// worker found nothing to run meanwhile. The slots added follow a smoothed
// target: the messages that finish during one receive when a worker
// waited (the smoothed finishing rate × the receive's duration, or the
// count that finished during it when more), none when no worker did. So
// slow receives next to fast handlers get about rate × receive latency
// more slots, and the messages they bring wait about one receive; handlers
// that keep every worker busy (slow, or slowed by a contended backend) get
// none, nor does a queue without a backlog. The rate matters where slots
// are freed in bursts (FIFO slots are freed when their delete batch
// returns): a receive between two bursts sees none finish during it.
type capacity struct {
	mu        sync.Mutex
	free      int
	threshold int // free slots needed before a receiver takes any
	wake      chan struct{}

	base  int // Concurrency + Prefetch
	most  int // base + the most receive-ahead may add (base when it is off)
	total int // base + what receive-ahead added

	grown chan struct{} // closed (and replaced) when receive-ahead starts adding slots

	finished uint64        // messages whose slots were freed, ever
	waits    atomic.Uint64 // times a worker found no message to run, ever
	added    float64       // the smoothed count of slots receive-ahead adds

	// The smoothed rate at which slots are freed (per second), updated by
	// observe over spans of at least rateSpan.
	rate      float64
	rateFrom  time.Time
	rateCount uint64 // finished at rateFrom
}

// rateSpan is the shortest span over which observe measures the rate at
// which slots are freed, and rateWeight the weight of each span's.
const (
	rateSpan   = 50 * time.Millisecond
	rateWeight = 0.3
)

// Receive-ahead's smoothing: a target above what is added is followed
// quickly (workers are waiting), one below slowly (about the last 20 full
// receives), so that a lucky receive does not take back what the others
// needed.
const (
	aheadUp   = 0.5
	aheadDown = 0.05
)

// aheadRound is the part of a batch below which added slots are not
// rounded up to a whole batch (see resize).
const aheadRound = 0.2

func newCapacity(concurrency, prefetch, ahead int) *capacity {
	base := concurrency + prefetch
	return &capacity{
		free:      base,
		threshold: min(sqslimits.MaxBatchEntries, prefetch+1, base),
		wake:      make(chan struct{}, 1),
		base:      base,
		most:      base + ahead,
		total:     base,
		grown:     make(chan struct{}),
	}
}

// mark is what a receiver notes when it takes slots, for observe.
type mark struct {
	finished, waits uint64
	at              time.Time
}

// reserve waits until enough slots are free and takes up to n of them.
func (c *capacity) reserve(ctx context.Context, n int) (int, mark, error) {
	for {
		c.mu.Lock()
		if c.free >= c.threshold {
			got := min(n, c.free)
			c.free -= got
			more := c.free >= c.threshold
			m := mark{c.finished, c.waits.Load(), time.Now()}
			c.mu.Unlock()
			if more {
				c.signal()
			}
			return got, m, nil
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-ctx.Done():
			return 0, mark{}, ctx.Err()
		}
	}
}

// waited records that a worker found no message to run.
func (c *capacity) waited() {
	if c.most > c.base {
		c.waits.Add(1)
	}
}

// ahead waits until receive-ahead adds slots; false when ctx is done.
func (c *capacity) ahead(ctx context.Context) bool {
	for {
		c.mu.Lock()
		on, grown := c.total > c.base, c.grown
		c.mu.Unlock()
		if on {
			return true
		}
		select {
		case <-grown:
		case <-ctx.Done():
			return false
		}
	}
}

// short is called after a receive that came back with fewer messages than
// it asked for: the backlog is gone, or going. An empty one drops what
// receive-ahead added; one with some messages lowers it slowly.
func (c *capacity) short(empty bool) {
	if c.most == c.base {
		return
	}
	c.mu.Lock()
	if empty {
		c.added = 0
	} else {
		c.added -= aheadDown * c.added
	}
	c.resize()
	c.mu.Unlock()
}

// resize sets total from added; c.mu is held.
func (c *capacity) resize() {
	// Receivers take slots a batch (threshold) at a time: 6 slots added
	// to a base of 42 never let a receive start early, since the tenth
	// free slot still came when a message finished. So what is added is
	// whole batches, a part from aheadRound of one up.
	batch := float64(c.threshold)
	total := min(c.base+c.threshold*int(math.Ceil(c.added/batch-aheadRound)), c.most)
	if c.total == c.base && total > c.base {
		close(c.grown)
		c.grown = make(chan struct{})
	}
	c.free += total - c.total // below 0 when shrinking: receivers then wait
	c.total = total
	if c.free >= c.threshold {
		c.signal()
	}
}

// observe is called after a full receive whose slots were taken at m: it
// moves the slots receive-ahead adds toward its target (see capacity).
func (c *capacity) observe(m mark) {
	if c.most == c.base {
		return
	}
	now := time.Now()
	c.mu.Lock()
	if c.rateFrom.IsZero() {
		c.rateFrom, c.rateCount = m.at, m.finished
	}
	if span := now.Sub(c.rateFrom); span >= rateSpan {
		r := float64(c.finished-c.rateCount) / span.Seconds()
		if c.rate == 0 {
			c.rate = r
		} else {
			c.rate += rateWeight * (r - c.rate)
		}
		c.rateFrom, c.rateCount = now, c.finished
	}
	target := 0.0
	if c.waits.Load() != m.waits {
		target = max(float64(c.finished-m.finished), c.rate*now.Sub(m.at).Seconds())
	}
	if target > c.added {
		c.added += aheadUp * (target - c.added)
	} else {
		c.added += aheadDown * (target - c.added)
	}
	c.resize()
	c.mu.Unlock()
}

// lend adds n slots while held messages (Limits) lend theirs to the
// receivers; unlend takes them back (free may go below 0: receivers then
// wait until as many are freed).
func (c *capacity) lend(n int) { c.add(n, false) }

func (c *capacity) unlend(n int) {
	c.mu.Lock()
	c.free -= n
	c.mu.Unlock()
}

// release frees n slots of messages that finished (settled, or on FIFO
// queues deleted).
func (c *capacity) release(n int) { c.add(n, true) }

// unreserve frees n slots a receiver took and did not fill.
func (c *capacity) unreserve(n int) { c.add(n, false) }

func (c *capacity) add(n int, finished bool) {
	c.mu.Lock()
	if finished {
		c.finished += uint64(n)
	}
	c.free += n
	ready := c.free >= c.threshold
	c.mu.Unlock()
	if ready {
		c.signal()
	}
}

func (c *capacity) signal() { wakeOne(c.wake) }

// wakeOne wakes one goroutine waiting on ch (a channel of capacity one),
// or none when a wake-up is already pending: the woken one re-checks, and
// passes the wake-up on when there is room for another.
func wakeOne(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
