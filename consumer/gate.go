package consumer

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/internal/settle"
)

// gate holds messages back. The workers ask it before they start a
// received message (admit), the receivers before they call ReceiveMessage
// (receiving). A message it holds stays in the in-flight set, where the
// heartbeat keeps it invisible: neither run nor released (a release
// would cost it a receive toward the queue's maxReceiveCount, and bring
// it back to be received again).
//
// It holds messages while the consumer is paused for an unavailable
// downstream ([BackPressure]). A limit on starts (a rate, at most k
// messages of a key at once) belongs here too, as one more condition of
// admit with the same hold, and receiving slowed while it holds many.
//
// The gate is open (one atomic load per message: the hot path), paused
// until a time (nothing starts, nothing is received), or probing: the
// pause is over and one message may start, as the probe; a receive call
// is made for it, asking for one message, only when the consumer holds
// none. The probe's result opens the gate (anything but a transient
// failure or Unavailable; a duplicate, a message not yet due or one
// released says nothing, and another message probes), or pauses it
// again.
type gate struct {
	bp  BackPressure
	log *zap.Logger
	obs Observer
	// held returns how many received messages are not yet settled (the
	// runner's unsettled count): a probe receive is made only at 0.
	held func() int64

	state atomic.Int32 // a gateState, written under mu
	// finished counts the messages whose handlers ended other than in a
	// transient failure: with the failures, the breaker's denominator.
	finished atomic.Uint64

	mu        sync.Mutex
	until     time.Time     // paused: when the probe may start
	pause     time.Duration // the last pause, doubled after a failed probe
	reason    string        // the last pause's Pause.Reason
	count     int           // pauses since the outage began
	since     time.Time     // when the outage's first pause began
	taken     bool          // probing: a worker runs the probe
	recvProbe bool          // probing: a receive call for the probe is in flight
	changed   chan struct{} // closed and replaced at each change of the above
	// fails are the breaker's last BreakerFailures transient failures (a
	// ring, next is where the next one goes, nfails how many it holds).
	fails  []failMark
	next   int
	nfails int
}

type gateState int32

const (
	gateOpen gateState = iota
	gatePaused
	gateProbing
)

// failMark is one transient failure the breaker counts.
type failMark struct {
	at       time.Time
	finished uint64 // gate.finished then
}

func newGate(bp BackPressure, log *zap.Logger, obs Observer, held func() int64) *gate {
	return &gate{bp: bp, log: log, obs: obs, held: held, changed: make(chan struct{})}
}

func (g *gate) st() gateState { return gateState(g.state.Load()) }

// isOpen reports whether messages start freely.
func (g *gate) isOpen() bool { return g.st() == gateOpen }

// set changes the state and wakes every waiter; g.mu is held.
func (g *gate) set(s gateState) {
	g.state.Store(int32(s))
	g.broadcast()
}

// broadcast wakes every waiter to look again; g.mu is held.
func (g *gate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// expire ends the pause once its time has come; g.mu is held.
func (g *gate) expire(now time.Time) {
	if g.st() == gatePaused && !now.Before(g.until) {
		g.taken = false
		g.set(gateProbing)
	}
}

// admit waits until the message a worker took may start: at once while
// the gate is open; while paused, until the pause ends and this message
// is the probe (probe true: pass it to done), or another message's probe
// opened the gate. False when stop closes first: the worker releases the
// message (the consumer is stopping).
func (g *gate) admit(stop <-chan struct{}) (probe, ok bool) {
	if g.isOpen() {
		return false, true
	}
	for {
		g.mu.Lock()
		g.expire(time.Now())
		s := g.st()
		if s == gateOpen {
			g.mu.Unlock()
			return false, true
		}
		if s == gateProbing && !g.taken {
			g.taken = true
			g.mu.Unlock()
			return true, true
		}
		ch, until := g.changed, g.until
		g.mu.Unlock()
		if !wait(ch, s == gatePaused, until, stop) {
			return false, false
		}
	}
}

// receiving waits until a receiver may call ReceiveMessage: at once while
// the gate is open; after a pause, for a single call that asks for one
// message (probe true: end it with probeReceived), once the consumer holds
// no received message that could be the probe instead. False when stop
// closes first.
func (g *gate) receiving(stop <-chan struct{}) (probe, ok bool) {
	if g.isOpen() {
		return false, true
	}
	for {
		g.mu.Lock()
		g.expire(time.Now())
		s := g.st()
		if s == gateOpen {
			g.mu.Unlock()
			return false, true
		}
		if s == gateProbing && !g.taken && !g.recvProbe && g.held() == 0 {
			g.recvProbe = true
			g.mu.Unlock()
			return true, true
		}
		ch, until := g.changed, g.until
		g.mu.Unlock()
		if !wait(ch, s == gatePaused, until, stop) {
			return false, false
		}
	}
}

// probeReceived ends a probe's receive call, which returned got messages
// (-1: it failed). One that found none pauses again for as long, so that
// a paused consumer makes at most one receive call a pause.
func (g *gate) probeReceived(got int) {
	g.mu.Lock()
	g.recvProbe = false
	if got != 0 || g.st() != gateProbing || g.taken {
		g.broadcast()
		g.mu.Unlock()
		return
	}
	ev := g.repause(time.Now(), g.pause, g.reason, nil)
	g.mu.Unlock()
	g.report(ev, "no message to probe with")
}

// settledAll is called when the last received message was settled: a
// receiver waiting to make a probe's receive may go.
func (g *gate) settledAll() {
	if g.isOpen() {
		return
	}
	g.mu.Lock()
	g.broadcast()
	g.mu.Unlock()
}

// wait waits for the gate to change, or, when paused, for until; false
// when stop closes first.
func wait(changed <-chan struct{}, paused bool, until time.Time, stop <-chan struct{}) bool {
	var end <-chan time.Time
	if paused {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		end = t.C
	}
	select {
	case <-changed:
		return true
	case <-end:
		return true
	case <-stop:
		return false
	}
}

// done tells the gate how a message it admitted ended (probe: it was the
// probe), before the message is settled. For a message whose downstream
// is unavailable it pauses the consumer (unless Off) and sets res.Delay to
// at least the pause, so that the message does not come back before it
// ends; and it reports hold for a probe that found the downstream still
// unavailable: the worker keeps that message, unsettled, for the next
// probe, so that a long outage costs no receive for each failed probe
// (a probe retried through the queue would be received again by the
// next probe, each time a receive toward maxReceiveCount).
func (g *gate) done(probe bool, res *Result) (hold bool) {
	switch {
	case settle.Unavailable(settle.Outcome(res.Outcome), res.Class):
		if !g.bp.Off {
			res.Delay = max(res.Delay, g.paused(PauseUnavailable, probe, res.RetryAfter, res.Err))
			return probe
		}
	case transient(*res):
		g.failed(probe, res.Err)
	case res.Outcome == OutcomeRelease || res.Outcome == OutcomeHold || res.Outcome == OutcomeDuplicate:
		// Not run to an end (shutdown, a lost lease), not due yet, or
		// already done: it says nothing of the downstream.
		if probe {
			g.giveBack()
		}
	default:
		g.finished.Add(1)
		if probe {
			g.resume()
		}
	}
	return false
}

// transient reports whether res is a failure retried with the backoff,
// which the breaker counts: not a RetryAfter (a retry asked for on
// purpose, such as dedupe's "in progress elsewhere") and not Unavailable.
func transient(res Result) bool {
	if res.Outcome != OutcomeRetry || res.Class == ClassUnavailable {
		return false
	}
	_, asked := errors.AsType[*RetryError](res.Err)
	return !asked
}

// paused pauses the consumer after a handler's error: for retryAfter when
// the downstream gave one (at most MaxPause); else for Pause when the
// gate was open, twice the last pause after a failed probe (at most
// MaxPause), the last pause otherwise (a handler that started before the
// pause failed during it). A pause under way that ends later stands. It
// returns how long from now the pause lasts.
func (g *gate) paused(reason string, probe bool, retryAfter time.Duration, err error) time.Duration {
	now := time.Now()
	g.mu.Lock()
	s := g.st()
	var d time.Duration
	switch {
	case retryAfter > 0:
		d = min(retryAfter, g.bp.MaxPause)
	case s == gateOpen:
		d = g.bp.Pause
	case probe:
		d = min(2*g.pause, g.bp.MaxPause)
	default:
		d = g.pause
	}
	if s == gatePaused {
		// Already paused: only ever later.
		if until := now.Add(d); until.After(g.until) {
			g.until, g.pause = until, d
			g.broadcast()
		}
		left := g.until.Sub(now)
		g.mu.Unlock()
		return left
	}
	if s == gateOpen {
		g.since, g.count = now, 0
	}
	ev := g.repause(now, d, reason, err)
	g.mu.Unlock()
	g.report(ev, "")
	return d
}

// repause pauses the gate for d from now and returns the event to
// report; g.mu is held.
func (g *gate) repause(now time.Time, d time.Duration, reason string, err error) Pause {
	g.count++
	g.until, g.pause, g.reason, g.taken = now.Add(d), d, reason, false
	g.nfails = 0
	g.set(gatePaused)
	return Pause{Reason: reason, Err: err, For: d, Count: g.count}
}

// report logs a pause and tells the Observer; why explains a pause that
// no error caused.
func (g *gate) report(ev Pause, why string) {
	fields := []zap.Field{zap.String("reason", ev.Reason), zap.Duration("for", ev.For), zap.Int("pauses", ev.Count), zap.Int64("in_flight", g.held())}
	if ev.Err != nil {
		fields = append(fields, zap.String("error", pipeline.HandlerText(ev.Err)))
	}
	if why != "" {
		fields = append(fields, zap.String("why", why))
	}
	g.log.Info("consumer: paused: no receives, held messages wait", fields...)
	pipeline.Paused(g.obs, ev)
}

// failed counts a transient failure. A failed probe pauses again; while
// the gate is open, the failure may open the breaker (see BackPressure).
func (g *gate) failed(probe bool, err error) {
	if g.bp.Off {
		return
	}
	if probe {
		g.paused(PauseBreaker, true, 0, err)
		return
	}
	if g.bp.BreakerOff || !g.isOpen() {
		return
	}
	now := time.Now()
	g.mu.Lock()
	if g.st() != gateOpen {
		g.mu.Unlock()
		return
	}
	if g.fails == nil {
		g.fails = make([]failMark, g.bp.BreakerFailures)
	}
	g.fails[g.next] = failMark{at: now, finished: g.finished.Load()}
	g.next = (g.next + 1) % len(g.fails)
	g.nfails = min(g.nfails+1, len(g.fails))
	trip := false
	if g.nfails == len(g.fails) {
		oldest := g.fails[g.next] // the ring is full: next is the oldest
		others := g.finished.Load() - oldest.finished
		n := float64(len(g.fails))
		trip = now.Sub(oldest.at) <= g.bp.BreakerWindow && n/(n+float64(others)) >= g.bp.BreakerRatio
	}
	g.mu.Unlock()
	if trip {
		g.paused(PauseBreaker, false, 0, err)
	}
}

// giveBack returns the probe's turn: the probe did not run to an end.
func (g *gate) giveBack() {
	g.mu.Lock()
	if g.st() == gateProbing && g.taken {
		g.taken = false
		g.broadcast()
	}
	g.mu.Unlock()
}

// resume opens the gate after a probe that succeeded.
func (g *gate) resume() {
	now := time.Now()
	g.mu.Lock()
	if g.st() != gateProbing {
		// Paused again meanwhile by a handler that started before.
		g.mu.Unlock()
		return
	}
	pausedFor, count := now.Sub(g.since), g.count
	g.count, g.pause, g.nfails, g.taken = 0, 0, 0, false
	g.set(gateOpen)
	g.mu.Unlock()
	g.log.Info("consumer: resumed: the probe succeeded", zap.Duration("paused_for", pausedFor), zap.Int("pauses", count))
	pipeline.Resumed(g.obs, pausedFor)
}
