package limit

import (
	"context"
	"errors"
	"time"
)

// RateStore keeps the timelines of fleet-wide rates. A rate of r per
// second is a timeline of slots one Every = 1/r apart; each slot is one
// start, and belongs to the one caller that leased it.
//
// Reserve leases a block of N consecutive slots of the rate called name,
// in one atomic step:
//
//	start := max(next, now − Burst)   // next: the first slot no caller has leased
//	                                  // (none yet: now − Burst)
//	if start > now + Ahead {
//		return RateLease{Next: start} // nothing leased: try again at Next − Ahead
//	}
//	next = start + N·Every
//	return RateLease{From: start, N: N, Next: next}
//
// now is the store's clock (its NowFunc). So the slots leased by every
// caller of one name never overlap, and over any span T the fleet starts at
// most T/Every + Burst/Every + 1 of them: a worker that leased a block
// spends its slots at their times, not before. Slots a caller leased and
// did not spend are lost, never made up beyond Burst.
//
// limitdynamo's and limitpg's Store implement it with one
// conditional write per block; the conformance suite in limittest says
// what another store (Redis, say) must do.
type RateStore interface {
	Reserve(ctx context.Context, name string, req RateRequest) (RateLease, error)
}

// RateRequest asks a [RateStore] for a block of slots.
type RateRequest struct {
	// Every is the time between two slots: one second divided by the
	// rate. Positive.
	Every time.Duration
	// N is how many slots to lease. Positive.
	N int
	// Burst is how far behind now a timeline left idle restarts: the
	// slots of that span may still be leased (and spent at once), so
	// that a short gap between blocks costs the fleet nothing. Not
	// negative.
	Burst time.Duration
	// Ahead is how far ahead of now the block may start: past it, the
	// timeline is leased far enough and nothing is leased. Not negative.
	Ahead time.Duration
}

// RateLease is what [RateStore.Reserve] leased: N slots, the first at
// From, one every RateRequest.Every. N is 0 when the timeline is leased
// beyond now + Ahead.
type RateLease struct {
	From time.Time
	N    int
	// Next is the timeline's first slot not leased, after the call.
	Next time.Time
}

// Slot names one holder's slot of a key: the unit of a per-key
// concurrency limit. At most limit holders hold a slot of Key at once
// (see [SlotStore]).
type Slot struct {
	// Name is the limit's name: keys of different names are apart.
	Name string
	// Key is what the limit counts by (an account, a tenant).
	Key string
	// Holder is unique per acquisition (see [Slots], which makes them).
	Holder string
}

// SlotStore keeps per-key concurrency slots leased with expiry: a holder
// keeps its slot by extending it before it expires, and a crashed
// holder's slot frees itself when it does.
type SlotStore interface {
	// Acquire takes a slot of s.Key for s.Holder until ttl from now,
	// unless limit holders already hold one that has not expired: then
	// ok is false and nothing changes. The check and the take are one
	// atomic step. An expired slot is another holder's to take.
	Acquire(ctx context.Context, s Slot, limit int, ttl time.Duration) (ok bool, err error)
	// Extend moves the expiry of s to ttl from now. It fails with an error
	// wrapping [ErrLost] when s.Holder no longer holds it: it expired and
	// another holder took it.
	Extend(ctx context.Context, s Slot, ttl time.Duration) error
	// Release frees s. Releasing a slot not held (expired and taken, or
	// released already) is not an error.
	Release(ctx context.Context, s Slot) error
}

// Store is both: what a fleet's consumers share their rate and per-key
// limits through (consumer.Limits.Store).
type Store interface {
	RateStore
	SlotStore
}

// ErrLost says that a slot's holder no longer holds it: it expired and
// another holder took it.
var ErrLost = errors.New("limit: the slot was lost: it expired and another holder took it")

// Reserve computes a [RateStore.Reserve] on a timeline whose first slot
// not leased is next (ok false: the timeline is new): the lease, and the
// timeline's new next. A store that can run this computation atomically
// (in a Lua script, under a lock) may use it as it is.
func Reserve(next time.Time, ok bool, now time.Time, req RateRequest) (lease RateLease, newNext time.Time) {
	start := now.Add(-req.Burst)
	if ok && next.After(start) {
		start = next
	}
	if start.After(now.Add(req.Ahead)) {
		return RateLease{Next: start}, start
	}
	end := start.Add(time.Duration(req.N) * req.Every)
	return RateLease{From: start, N: req.N, Next: end}, end
}

// check validates a request; prefix names the caller in the error.
func (req RateRequest) check(prefix string) error {
	if req.Every <= 0 || req.N <= 0 || req.Burst < 0 || req.Ahead < 0 {
		return errors.New(prefix + ": a RateRequest needs Every > 0, N > 0, Burst ≥ 0 and Ahead ≥ 0")
	}
	return nil
}

// Check reports a RateRequest a store must refuse; stores call it first.
func (req RateRequest) Check() error { return req.check("limit") }

// Check reports a Slot or limit a store must refuse; stores call it first.
func (s Slot) Check(limit int) error {
	if s.Name == "" || s.Holder == "" {
		return errors.New("limit: a Slot needs a Name and a Holder")
	}
	if limit < 1 {
		return errors.New("limit: a slot limit must be at least 1")
	}
	return nil
}
