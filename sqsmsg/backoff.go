package sqsmsg

import (
	"cmp"
	"time"

	"github.com/sqsonce/sqsonce/internal/backoff"
)

// Backoff is the retry policy for transient failures: exponential from Base,
// capped at Cap, with full jitter (the delay is drawn uniformly from
// [0, min(Cap, Base·2^(attempt-1))]), where attempt is the message's
// [Message.Attempt] (its ApproximateReceiveCount, less the FIFO receives
// in which it waited behind its group and did not run).
type Backoff struct {
	// Base is the ceiling of the first retry's delay. Defaults to 1s.
	Base time.Duration
	// Cap is the largest delay. Defaults to 15m.
	Cap time.Duration
	// RandFunc returns a pseudo-random number in [0, n). Defaults to
	// math/rand/v2.Int64N. Tests can return n-1 to always get the ceiling.
	RandFunc func(n int64) int64
}

// Default backoff values.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffCap  = 15 * time.Minute
)

// Delay returns the retry delay for the given 1-based attempt.
func (b Backoff) Delay(attempt int) time.Duration {
	base := cmp.Or(b.Base, DefaultBackoffBase)
	limit := cmp.Or(b.Cap, DefaultBackoffCap)
	return backoff.FullJitter(base, limit, attempt, b.RandFunc)
}

// Ceiling returns the largest delay [Backoff.Delay] can return for the
// given 1-based attempt: min(Cap, Base·2^(attempt-1)), without jitter. It
// is the delay of a retry that must not come back at once (a dead letter
// that SQS refused).
func (b Backoff) Ceiling(attempt int) time.Duration {
	return backoff.Ceiling(cmp.Or(b.Base, DefaultBackoffBase), cmp.Or(b.Cap, DefaultBackoffCap), attempt)
}
