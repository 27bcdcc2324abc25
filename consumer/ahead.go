package consumer

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Receive-ahead.
//
// A receiver asks SQS for messages once slots are free, and the slots it
// takes stay empty until the receive returns. At R messages a second and
// a receive latency of L, about R×L slots are empty at any time; with
// Concurrency+Prefetch slots only, that many workers idle (a 20 ms handler
// at Concurrency 100 runs 5,000 messages a second: 5 ms receives leave 25
// workers idle). So, with the default Prefetch, the consumer measures its
// handlers' rate (Concurrency ÷ mean handler time) and the latency of
// receives that found messages, and grants 2×R×L extra slots, in tens,
// at most min(Concurrency, maxAhead); and wakes one more receiver per ten
// of them, up to maxReceivers. No receive-ahead while receives come back
// empty (nothing to get ahead of) or while handlers are slow (2×R×L < 1).
// Messages received ahead wait, heartbeated, for a worker, and are
// released at once at shutdown like prefetched ones.

const (
	// maxAhead bounds receive-ahead slots: at most Concurrency +
	// Prefetch + min(Concurrency, maxAhead) messages are held at once.
	maxAhead = 200
	// maxReceivers bounds the receiver goroutines when Receivers is not
	// set.
	maxReceivers = 24
	// tuneEvery is how often receive-ahead is recomputed.
	tuneEvery = 50 * time.Millisecond
	// waitedReceive: a receive that took longer waited in the long poll
	// (the queue was empty); its latency says nothing about SQS's.
	waitedReceive = time.Second
)

// pace collects what receive-ahead is computed from. Its counters are
// written by workers and receivers and read by tune.
type pace struct {
	handledN, handledNs   atomic.Int64 // handler runs and their total time since the last tune
	receivedN, receivedNs atomic.Int64 // receives that found messages without waiting, and their total latency
	empty                 atomic.Int64 // receives that found nothing or waited

	// Owned by tune.
	handlerTime, latency float64 // moving averages, seconds
	idle                 bool    // the last receives found nothing
}

func (p *pace) handled(d time.Duration) {
	p.handledN.Add(1)
	p.handledNs.Add(int64(d))
}

func (p *pace) received(n int, d time.Duration) {
	if n == 0 || d > waitedReceive {
		p.empty.Add(1)
		return
	}
	p.receivedN.Add(1)
	p.receivedNs.Add(int64(d))
}

// tune recomputes receive-ahead every tuneEvery until ctx is done.
func (p *pace) tune(ctx context.Context, c *capacity, concurrency, aheadMax int) {
	t := time.NewTicker(tuneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.setAhead(p.ahead(concurrency, aheadMax))
	}
}

// ahead folds the counters since the last call into the moving averages
// and returns the slots to grant.
func (p *pace) ahead(concurrency, aheadMax int) int {
	const weight = 0.3 // of the newest window
	if n := p.handledN.Swap(0); n > 0 {
		p.handlerTime = avg(p.handlerTime, float64(p.handledNs.Swap(0))/float64(n)/1e9, weight)
	}
	empty := p.empty.Swap(0)
	n := p.receivedN.Swap(0)
	if n > 0 {
		p.latency = avg(p.latency, float64(p.receivedNs.Swap(0))/float64(n)/1e9, weight)
	}
	switch {
	case n > 0:
		p.idle = false
	case empty > 0:
		p.idle = true
	}
	if p.idle || p.handlerTime <= 0 || p.latency <= 0 {
		// An empty queue: nothing to receive ahead of, until a receive
		// finds messages again.
		return 0
	}
	want := 2 * float64(concurrency) / p.handlerTime * p.latency
	if want < 1 {
		return 0
	}
	return min(int(math.Ceil(want/settleBatch))*settleBatch, aheadMax)
}

func avg(old, v, weight float64) float64 {
	if old == 0 {
		return v
	}
	return old + weight*(v-old)
}

// capacity counts free slots (Concurrency+Prefetch, plus receive-ahead's)
// for receivers.
//
// A receiver takes slots only when a full batch (10) is free, or when
// fewer slots are held than there are workers (more than Prefetch free), so
// that a worker would otherwise idle. With Prefetch of 9 or more every
// receive asks for 10 (one receive call per ten messages); with Prefetch 0
// a receiver asks for whatever a free worker can start at once.
type capacity struct {
	mu        sync.Mutex
	free      int // may be negative for a while after receive-ahead shrinks
	threshold int // free slots needed before a receiver takes any
	ahead     int // slots granted by receive-ahead
	base      int // receivers always active
	total     int // receiver goroutines
	active    int // receivers allowed to receive now
	changed   chan struct{}
}

func newCapacity(concurrency, prefetch, receivers, total int) *capacity {
	return &capacity{
		free:      concurrency + prefetch,
		threshold: min(settleBatch, prefetch+1, concurrency+prefetch),
		base:      receivers,
		total:     max(total, receivers),
		active:    receivers,
		changed:   make(chan struct{}),
	}
}

// reserve waits until receiver id may receive and enough slots are free,
// and takes up to n of them.
func (c *capacity) reserve(ctx context.Context, id, n int) (int, error) {
	for {
		c.mu.Lock()
		if id < c.active && c.free >= c.threshold {
			got := min(n, c.free)
			c.free -= got
			c.mu.Unlock()
			return got, nil
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (c *capacity) release(n int) {
	c.mu.Lock()
	c.free += n
	if c.free >= c.threshold {
		c.broadcast()
	}
	c.mu.Unlock()
}

// setAhead sets receive-ahead's slots to n and wakes a receiver per ten.
func (c *capacity) setAhead(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == c.ahead {
		return
	}
	c.free += n - c.ahead
	c.ahead = n
	c.active = min(c.base+(n+settleBatch-1)/settleBatch, c.total)
	c.broadcast()
}

// broadcast wakes every waiting receiver; c.mu is held.
func (c *capacity) broadcast() {
	close(c.changed)
	c.changed = make(chan struct{})
}
