package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/limit"
)

// limiter applies [Limits] to the messages the workers take, after the
// gate admitted them (gate.go): the gate holds every message while the
// consumer is paused, the limiter holds one while a limit is reached.
//
// The rate comes first: the worker waits with its message for the next
// token (a token bucket in process, the fleet's slots with Store), as
// nothing else could start before it anyway. Then the key's limit: a
// slot of the message's key is taken (with Store, one conditional write),
// or the message is held back. In that order a message waiting for the
// rate holds no slot of its key (which would keep the key's other
// messages waiting as long: each of the key's slots would pass one
// message per wait for the rate), and a message held back leaves its
// rate token to its worker, which starts its next message with it
// (limitToken), so the token is not lost.
//
// A held message waits apart from the worker, in its key's queue, so that
// the worker runs messages of other keys meanwhile; it is woken (sent back
// to the workers: standard queues, the work channel; FIFO, its lane, to
// the ready queue) when a slot of its key is freed in this process, or,
// with Store, when its key's backoff ends (the slots are other
// processes'); woken, it waits for the rate again, then takes the slot or
// is held again, first in its key's queue. A held message stays in the
// in-flight set (the heartbeat keeps it invisible) and keeps its capacity
// slot, but up to MaxHeld of them lend theirs back to the receivers
// (capacity.lend), so that messages of other keys keep coming.
type limiter struct {
	r   *runner
	log *zap.Logger

	// The rate: bucket in process (with Adaptive and Store, the adaptive
	// ceiling under the fleet's), fleet with Store.
	bucket *rate.Limiter
	fleet  *limit.Rate
	// adapt is Adaptive's rate (nil when off), under adaptMu with
	// bucketRate, the bucket's limit.
	adaptMu    sync.Mutex
	adapt      *aimd
	bucketRate float64

	keyFunc func(*Message) (string, int)
	maxHeld int
	// slots holds this process's slots of the fleet's key limits; nil
	// without Store.
	slots *limit.Slots

	mu   sync.Mutex
	keys map[string]*keyState
	// spare are keyStates to reuse (a key's is dropped once nothing of it
	// runs or waits: with many keys, one a message).
	spare []*keyState
	// unlent are the held messages past MaxHeld, oldest first, which keep
	// their capacity slots (some may have left: gone).
	unlent []*heldMsg
	lent   int
	closed bool
	// due tells the fleet poller that a key's retryAt was set (capacity 1).
	due chan struct{}
}

// keyState is one key's: the messages of it this process holds a slot
// for, and those held back, in order.
type keyState struct {
	running int
	held    []*heldMsg
	// With Store: when the poller wakes the first held message to ask the
	// store again, and the backoff.
	retryAt time.Time
	backoff time.Duration
}

// heldMsg is a message held back by its key's limit; l is its lane, on a
// FIFO queue (the lane waits with its head).
type heldMsg struct {
	m    *inflight
	l    *lane
	lent bool // its capacity slot is lent to the receivers
	gone bool // no longer held
}

// msgLimit is a message's key limit, found once (KeyLimitFunc); part of
// its inflight record, so that it costs no allocation.
type msgLimit struct {
	key   string
	n     int        // 0: no limit
	slot  limit.Slot // with Store: the slot it holds
	found bool       // KeyLimitFunc was asked
	keyed bool       // it holds a slot of key
	woken bool       // it was held, and woken to try again: first in line
}

// limitToken is a rate token a worker carries from a message its key's
// limit held back to the worker's next message; each worker has its own.
type limitToken struct {
	at time.Time // when it was taken; zero: none
}

// tokenFresh is how long a carried token may wait for the worker's next
// message: a token spent later would be a start above the rate.
const tokenFresh = 50 * time.Millisecond

// take spends the carried token, if fresh.
func (t *limitToken) take() bool {
	if t.at.IsZero() {
		return false
	}
	ok := time.Since(t.at) <= tokenFresh
	t.at = time.Time{}
	return ok
}

// limitVerdict is what the limiter decided for a message.
type limitVerdict int

const (
	limitStart limitVerdict = iota // run it
	limitHeld                      // held back: the limiter has it
	limitStop                      // the consumer is stopping: release it
)

// Retries of a key held by other processes (with Store): the first after
// keyRetryFirst, doubling to keyRetryMax, each ±20% at random.
const (
	keyRetryFirst = 25 * time.Millisecond
	keyRetryMax   = 500 * time.Millisecond
)

func newLimiter(r *runner, cfg Limits) (*limiter, error) {
	l := &limiter{
		r: r, log: r.log, keyFunc: cfg.KeyLimitFunc, maxHeld: cfg.MaxHeld,
		keys: map[string]*keyState{}, spare: make([]*keyState, 0, 64), due: make(chan struct{}, 1),
	}
	name := cfg.Name
	if name == "" {
		name = path.Base(r.q.url)
	}
	if cfg.Rate > 0 {
		if cfg.Store == nil || cfg.Adaptive.On {
			l.bucket = rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst)
			l.bucketRate = cfg.Rate
		}
		if cfg.Store != nil {
			f, err := limit.NewRate(limit.RateConfig{Store: cfg.Store, Name: name, Rate: cfg.Rate, Block: cfg.Block, Burst: cfg.Burst, Logger: r.log})
			if err != nil {
				return nil, fmt.Errorf("consumer: Limits: %w", err)
			}
			l.fleet = f
		}
		if cfg.Adaptive.On {
			l.adapt = newAIMD(cfg.Rate, cfg.Adaptive, time.Now())
		}
	}
	if cfg.KeyLimitFunc != nil && cfg.Store != nil {
		// A slot outlives its last extension (each heartbeat tick) by the
		// visibility timeout: a crashed worker's slots free themselves when
		// its messages come back.
		interval := orDefault(r.cfg.HeartbeatInterval, r.q.visibility/3)
		s, err := limit.NewSlots(limit.SlotsConfig{Store: cfg.Store, Name: name, TTL: max(r.q.visibility, 3*interval)})
		if err != nil {
			return nil, fmt.Errorf("consumer: Limits: %w", err)
		}
		l.slots = s
	}
	return l, nil
}

// start decides whether m, which the gate admitted (as the probe of a
// pause when probe), may run now: it waits for the rate (or spends the
// worker's carried token, tok), then takes a slot of m's key, or holds m
// back (then it gives the probe's turn back to the gate, and the rate
// token to tok).
func (l *limiter) start(ctx context.Context, m *inflight, ln *lane, probe bool, tok *limitToken) limitVerdict {
	rated := l.bucket != nil || l.fleet != nil
	if rated && !tok.take() {
		if l.wait(ctx) != nil {
			return limitStop
		}
	}
	if l.keyFunc != nil {
		switch l.takeKey(ctx, m, ln) {
		case limitHeld:
			if probe {
				l.r.gate.giveBack()
			}
			if rated {
				tok.at = time.Now()
			}
			return limitHeld
		case limitStop:
			return limitStop
		}
	}
	return limitStart
}

// keyOf finds m's key limit: its body read first (KeyLimitFunc sees the
// body as sent; a body that cannot be had gets no limit, and the pipeline
// classifies its failure), KeyLimitFunc called under a recover.
func (l *limiter) keyOf(m *inflight) (key string, n int) {
	if err := l.r.pipeline.Decode(l.r.workBase, m.msg); err != nil {
		return "", 0
	}
	defer func() {
		if v := recover(); v != nil {
			pipeline.LogPanic(l.log, "Limits.KeyLimitFunc", v, zap.String("message_id", m.msg.ID))
			key, n = "", 0
		}
	}()
	key, n = l.keyFunc(m.msg)
	if key == "" || n < 1 {
		return "", 0
	}
	return key, n
}

// takeKey takes a slot of m's key for it, or holds m back.
func (l *limiter) takeKey(ctx context.Context, m *inflight, ln *lane) limitVerdict {
	ml := m.lim
	if !ml.found {
		ml.key, ml.n = l.keyOf(m)
		ml.found = true
	}
	if ml.n == 0 || ml.keyed {
		return limitStart
	}
	woken := ml.woken
	ml.woken = false
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return limitStop
	}
	ks := l.keys[ml.key]
	if ks == nil {
		if n := len(l.spare); n > 0 {
			ks, l.spare = l.spare[n-1], l.spare[:n-1]
		} else {
			ks = &keyState{}
		}
		l.keys[ml.key] = ks
	}
	if (len(ks.held) > 0 && !woken) || ks.running >= ml.n {
		// Behind the key's held messages, in order (a woken one is first
		// in line); a slot of the key freed here wakes the first (done),
		// and with Store the poller wakes it after a backoff.
		l.hold(ks, m, ln, woken)
		if l.slots != nil && ks.running == 0 && ks.retryAt.IsZero() {
			// No slot of the key here to wake it: the poller will.
			l.retryLater(ks, false)
		}
		l.mu.Unlock()
		return limitHeld
	}
	ks.running++ // counted while the store is asked, so none starts past it here
	if l.slots == nil {
		ml.keyed = true
		l.mu.Unlock()
		return limitStart
	}
	l.mu.Unlock()

	slot, ok, err := l.slots.Acquire(ctx, ml.key, ml.n)
	if err != nil && ctx.Err() == nil {
		l.log.Warn("consumer: Limits: acquiring a slot of a key failed; the message is held and tries again",
			zap.String("message_id", m.msg.ID), zap.Error(err))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		ml.keyed, ml.slot = true, slot
		ks.backoff = 0
		return limitStart
	}
	ks.running--
	if l.closed {
		l.forget(ml.key, ks)
		return limitStop
	}
	l.hold(ks, m, ln, woken)
	l.retryLater(ks, err != nil)
	return limitHeld
}

// hold holds m (the head of lane ln, on a FIFO queue) back behind ks's
// held messages (first, when it was woken), and lends its capacity slot
// while fewer than MaxHeld do; l.mu is held.
func (l *limiter) hold(ks *keyState, m *inflight, ln *lane, first bool) {
	h := &heldMsg{m: m, l: ln}
	if first {
		ks.held = append([]*heldMsg{h}, ks.held...)
	} else {
		ks.held = append(ks.held, h)
	}
	if l.lent < l.maxHeld {
		l.lent++
		h.lent = true
		l.r.capacity.lend(1)
	} else {
		l.unlent = append(l.unlent, h)
	}
	l.log.Debug("consumer: held back by its key's limit", zap.String("message_id", m.msg.ID), zap.Int("held", len(ks.held)))
}

// retryLater schedules the poller's next wake of ks's first held message,
// after a backoff (at least a second after a failed call); l.mu is held.
func (l *limiter) retryLater(ks *keyState, failed bool) {
	ks.backoff = min(max(2*ks.backoff, keyRetryFirst), keyRetryMax)
	d := ks.backoff
	if failed {
		d = max(d, time.Second)
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	ks.retryAt = time.Now().Add(d)
	select {
	case l.due <- struct{}{}:
	default:
	}
}

// wake sends ks's first held message back to the workers, to try again,
// and passes its lent capacity slot to the oldest held message without
// one; l.mu is held (so that close, which takes the held messages to
// release them, and the work channel's close after it, come after).
func (l *limiter) wake(ks *keyState) {
	h := ks.held[0]
	ks.held[0] = nil
	ks.held = ks.held[1:]
	h.m.lim.woken = true
	h.gone = true
	if h.lent {
		passed := false
		for len(l.unlent) > 0 && !passed {
			x := l.unlent[0]
			l.unlent[0] = nil
			l.unlent = l.unlent[1:]
			if !x.gone {
				x.lent, passed = true, true
			}
		}
		if !passed {
			l.lent--
			l.r.capacity.unlend(1)
		}
	}
	// Never full: held messages are received ones, and the channels hold
	// as many as the consumer may (see newRunner).
	if h.l != nil {
		h.l.head = h.m
		l.r.ready <- h.l
	} else {
		l.r.queue <- h.m
	}
}

// done is called once m, which held a slot of its key, is settled: the
// slot is freed, and the key's first held message woken to take it.
func (l *limiter) done(m *inflight) {
	ml := m.lim
	ml.keyed = false
	l.mu.Lock()
	ks := l.keys[ml.key]
	ks.running--
	if len(ks.held) > 0 && !l.closed {
		l.wake(ks)
	}
	l.forget(ml.key, ks)
	l.mu.Unlock()
	if l.slots != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(l.r.workBase), settleCallTimeout)
		defer cancel()
		if err := l.slots.Release(ctx, ml.slot); err != nil {
			l.log.Warn("consumer: Limits: releasing a key's slot failed; it frees itself when it expires", zap.Error(err))
		}
	}
}

// forget drops ks once nothing of its key runs or waits; l.mu is held.
func (l *limiter) forget(key string, ks *keyState) {
	if ks.running == 0 && len(ks.held) == 0 {
		delete(l.keys, key)
		if len(l.spare) < cap(l.spare) {
			*ks = keyState{held: ks.held[:0]}
			l.spare = append(l.spare, ks)
		}
	}
}

// close stops holding: it returns the held messages, for the drain to
// release; a slot freed after wakes none.
func (l *limiter) close() []*inflight {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	var out []*inflight
	for key, ks := range l.keys {
		for _, h := range ks.held {
			h.gone = true
			out = append(out, h.m)
		}
		ks.held = nil
		l.forget(key, ks)
	}
	l.unlent, l.lent = nil, 0
	return out
}

// wait waits for the rate: the adaptive ceiling's bucket, then the
// fleet's slots; an error when ctx ends first.
func (l *limiter) wait(ctx context.Context) error {
	if l.adapt != nil {
		now := time.Now()
		l.adaptMu.Lock()
		if r := l.adapt.rate(now); r > l.bucketRate*1.005 || r < l.bucketRate*0.995 {
			l.bucket.SetLimitAt(now, rate.Limit(r))
			l.bucketRate = r
		}
		l.adaptMu.Unlock()
	}
	if l.bucket != nil {
		if err := l.bucket.Wait(ctx); err != nil {
			return err
		}
	}
	if l.fleet != nil {
		if err := l.fleet.Wait(ctx); err != nil {
			return err
		}
	}
	if l.adapt != nil {
		l.adaptMu.Lock()
		l.adapt.started(time.Now())
		l.adaptMu.Unlock()
	}
	return nil
}

// result lowers the adaptive rate after a handler's RateLimited.
func (l *limiter) result(res *Result) {
	if l.adapt == nil || !res.RateLimited {
		return
	}
	now := time.Now()
	l.adaptMu.Lock()
	from, to, cut := l.adapt.slowDown(now)
	if cut {
		l.bucket.SetLimitAt(now, rate.Limit(to))
		l.bucketRate = to
	}
	l.adaptMu.Unlock()
	if cut {
		l.log.Info("consumer: rate lowered: the downstream asked to slow down", zap.Float64("from", from), zap.Float64("to", to))
	}
}

// extend extends the fleet slots this process holds (each heartbeat
// tick); a slot lost (it expired, and another worker took it) is logged:
// its key may run more than its limit until the message ends.
func (l *limiter) extend(ctx context.Context) {
	if l.slots == nil || l.slots.Held() == 0 {
		return
	}
	lost, err := l.slots.Extend(ctx)
	if len(lost) > 0 {
		l.log.Warn("consumer: Limits: slots of a key limit expired before they were extended; their keys may run past the limit until those messages end",
			zap.Int("slots", len(lost)))
	}
	if err != nil && ctx.Err() == nil {
		l.log.Warn("consumer: Limits: extending the slots of key limits failed; tried again at the next heartbeat", zap.Error(err))
	}
}

// poll wakes, with Store, the first held message of each key whose
// backoff ended (its slots are other processes', which free them without
// a word to this one): it tries the store again. It returns when ctx ends
// (the drain) or the limiter closes.
func (l *limiter) poll(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return
		}
		now := time.Now()
		var next time.Time
		for _, ks := range l.keys {
			if len(ks.held) == 0 || ks.retryAt.IsZero() {
				continue
			}
			if !ks.retryAt.After(now) {
				// Woken: it waits for the rate, then asks the store; held
				// again, it sets the next retryAt.
				ks.retryAt = time.Time{}
				l.wake(ks)
			} else if next.IsZero() || ks.retryAt.Before(next) {
				next = ks.retryAt
			}
		}
		l.mu.Unlock()
		wait := time.Hour
		if !next.IsZero() {
			wait = next.Sub(now)
		}
		timer.Reset(wait)
		select {
		case <-l.due:
		case <-timer.C:
		case <-ctx.Done():
			return
		}
		timer.Stop()
	}
}
