package consumer

import (
	"errors"
	"fmt"
	"math"

	"github.com/sqsonce/sqsonce/limit"
)

// Limits bounds when messages start ([Config.Limits]; "Limits" in
// docs/architecture.md): a rate (messages started per second) and a
// per-key concurrency limit (at most k messages of a key at once, such as
// two credits of one account). The zero value limits nothing.
//
// Both are this process's by default, kept in memory. With Store they are
// the fleet's: every consumer given the same Store and Name shares them,
// so ten autoscaled workers together start at most Rate messages a second
// and at most k of a key at once (package limit says how: a rate's slots
// leased in blocks, one store write per Block starts; a key's slots
// leased with expiry, so a crashed worker's free themselves).
//
// A message a limit holds back is neither run nor released: it waits in
// the consumer's in-flight set, where the heartbeat keeps it invisible
// (a release would cost it a receive toward the queue's maxReceiveCount).
// Waiting for the rate, it holds its worker, and receiving slows as the
// slots of Concurrency+Prefetch fill. Held back by its key's limit, it
// frees its worker for messages of other keys and waits for a slot of its
// key, in the order it came; up to MaxHeld such messages also give their
// slot to a receive, so that other keys' messages keep coming; past
// MaxHeld, they keep their slots and receiving slows instead.
type Limits struct {
	// Rate is the most messages started per second, each start being a
	// handler's run (a retry's too). Without Store it is this
	// consumer's (a token bucket of Burst); with Store, the fleet's.
	// Defaults to 0: no limit.
	Rate float64
	// Burst is how many messages may start at once after an idle spell:
	// the bucket's size without Store; with Store, the slots of a timeline
	// left idle that may still be spent. Defaults to 1: never above the
	// rate.
	Burst int
	// KeyLimitFunc returns a message's key and how many messages of that
	// key may run at once (an account, 2); an empty key or a limit below
	// 1 is no limit for that message. It is called once per message,
	// before it starts and after its body was read (from S3, or
	// decompressed), under a recover: a panic is logged and the message
	// has no key limit. Defaults to nil: no per-key limit.
	KeyLimitFunc func(*Message) (key string, limit int)
	// MaxHeld is how many messages held back by KeyLimitFunc's limit give
	// their slot of Concurrency+Prefetch to a receive; those held past it
	// keep theirs, and receiving slows. Defaults to Concurrency.
	MaxHeld int

	// Store, when set, makes Rate and KeyLimitFunc's limits the fleet's:
	// shared by every consumer given the same Store and Name, in any
	// process (limitdynamo.Store, limitpg.Store, or your own
	// [limit.Store]). Defaults to nil: this process's, in memory.
	Store limit.Store
	// Name names the limits in Store. Defaults to the queue's name.
	Name string
	// Block is how many of the fleet rate's slots one store write leases
	// (see limit.RateConfig.Block). Defaults to a tenth of Rate, at least
	// 1.
	Block int

	// Adaptive lowers Rate when the downstream asks to slow down, and
	// brings it back when it stops asking. Defaults to off.
	Adaptive Adaptive
}

// Adaptive adapts [Limits.Rate] to a downstream that asks its callers to
// slow down (an HTTP 429 with Retry-After), by additive increase and
// multiplicative decrease (AIMD), as TCP does: a handler's [RateLimited]
// (or a Classifier's verdict of class [ClassRateLimited]) multiplies the
// rate by Decrease (at most once a second: the messages in flight when
// the downstream first said so bring the same news), starting from the
// rate at which messages started over the last second when that is
// lower; each second without one adds Increase, up to Limits.Rate. With
// Store the adapted rate is this consumer's own ceiling under the
// fleet's Rate: each worker that hears the downstream slows down.
//
// The message that was told to slow down is retried after the
// downstream's Retry-After, and the consumer pauses as for [Unavailable]
// (see [BackPressure]).
type Adaptive struct {
	// On turns adaptation on. It needs a Limits.Rate, the most it
	// returns to. Defaults to false.
	On bool
	// Decrease multiplies the rate at each slow-down, between 0 and 1.
	// Defaults to 0.5.
	Decrease float64
	// Increase is how many messages per second the rate gains each
	// second without a slow-down. Defaults to a twentieth of Limits.Rate:
	// from half the rate back to all of it in ten seconds.
	Increase float64
	// Min is the lowest the rate goes. Defaults to a hundredth of
	// Limits.Rate.
	Min float64
}

// withDefaults fills l's zero values (concurrency is Config.Concurrency)
// and checks it.
func (l Limits) withDefaults(concurrency int) (Limits, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("consumer: Limits."+format, args...)) }
	if math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.Rate < 0 || l.Rate > 1e9 {
		bad("Rate %v must be messages per second from 0 (no limit) to 1e9", l.Rate)
	}
	if l.Burst < 0 || l.MaxHeld < 0 || l.Block < 0 {
		bad("Burst (%d), MaxHeld (%d) and Block (%d) must not be negative", l.Burst, l.MaxHeld, l.Block)
	}
	if l.Store != nil && l.Rate == 0 && l.KeyLimitFunc == nil {
		bad("Store shares Rate and KeyLimitFunc's limits with the fleet: set one of them, or leave Store nil")
	}
	a := &l.Adaptive
	if a.On {
		switch {
		case l.Rate == 0:
			bad("Adaptive needs a Rate: the most it brings the rate back to")
		case math.IsNaN(a.Decrease) || a.Decrease < 0 || a.Decrease >= 1:
			bad("Adaptive.Decrease %v must be above 0 and below 1 (0: the default, 0.5)", a.Decrease)
		case math.IsNaN(a.Increase) || math.IsInf(a.Increase, 0) || a.Increase < 0:
			bad("Adaptive.Increase %v must be messages per second ≥ 0 (0: the default, Rate/20)", a.Increase)
		case math.IsNaN(a.Min) || a.Min < 0 || a.Min > l.Rate:
			bad("Adaptive.Min %v must be from 0 (the default, Rate/100) to Rate (%v)", a.Min, l.Rate)
		}
		if a.Decrease == 0 {
			a.Decrease = 0.5
		}
		if a.Increase == 0 {
			a.Increase = l.Rate / 20
		}
		if a.Min == 0 {
			a.Min = l.Rate / 100
		}
	}
	if l.Burst == 0 {
		l.Burst = 1
	}
	if l.MaxHeld == 0 {
		l.MaxHeld = max(concurrency, 1)
	}
	return l, errors.Join(errs...)
}

// on reports whether any limit is set.
func (l Limits) on() bool { return l.Rate > 0 || l.KeyLimitFunc != nil }
