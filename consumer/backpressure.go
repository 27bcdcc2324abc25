package consumer

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// BackPressure configures how the consumer pauses for a downstream that
// is unavailable ([Config.BackPressure]; "Back-pressure" in
// docs/architecture.md). The zero value is on, with the defaults below.
//
// Two things pause the consumer:
//
//   - a handler's [Unavailable] error (or a Classifier's verdict of class
//     [ClassUnavailable]): at once, for the downstream's Retry-After when
//     it gave one (at most MaxPause), else for Pause;
//   - the circuit breaker: when the last BreakerFailures transient
//     failures (errors retried with the Backoff: not [RetryAfter], not
//     Unavailable) all came within BreakerWindow, and were at least
//     BreakerRatio of the messages finished since the first of them; for
//     Pause.
//
// While paused the consumer makes no receive call and starts no message:
// the messages it holds (received, not started) stay in its in-flight
// set, where the heartbeat keeps them invisible, neither run nor released
// (a release would cost each a receive toward the queue's
// maxReceiveCount). Handlers already running finish. When the pause ends
// one message runs as a probe: a message held, or, when none is, the one
// message a single receive call asks for (one receive per pause). The
// probe succeeding (anything but a transient failure or Unavailable)
// returns the consumer to full speed; failing, it pauses again, for the
// new Retry-After or for twice the last pause (at most MaxPause).
//
// The message whose handler said Unavailable is retried after its
// Retry-After, or the pause when that is longer; it is never
// dead-lettered for it, and that receive does not count toward
// MaxAttempts ([Message.Attempt]). SQS still counts it toward the queue's
// maxReceiveCount: an outage costs a message at most the receive it
// failed in and one probe receive for each pause it is the probe of.
type BackPressure struct {
	// Off turns back-pressure off: [Unavailable] is then only a retry
	// after its Retry-After (or Pause), not dead-lettered and not an
	// attempt, and nothing pauses. Defaults to false.
	Off bool
	// Pause is how long the consumer pauses when the downstream gave no
	// Retry-After, or the breaker opened; after each failed probe the
	// pause doubles, up to MaxPause. Defaults to DefaultPause (5s).
	Pause time.Duration
	// MaxPause caps every pause, a Retry-After included (the message that
	// gave it is still retried after the whole Retry-After). Defaults to
	// DefaultMaxPause (5m).
	MaxPause time.Duration

	// BreakerOff turns the circuit breaker off: only [Unavailable] pauses.
	// Defaults to false.
	BreakerOff bool
	// BreakerFailures is how many transient failures, all within
	// BreakerWindow, open the breaker (with BreakerRatio). Defaults to
	// DefaultBreakerFailures (20): a handful of bad messages never pauses
	// the consumer.
	BreakerFailures int
	// BreakerRatio is the share of the messages finished since the first
	// of those failures that must have failed transiently, from 0 to 1.
	// Defaults to DefaultBreakerRatio (0.5).
	BreakerRatio float64
	// BreakerWindow is the span the BreakerFailures failures must fall
	// within. Defaults to DefaultBreakerWindow (30s).
	BreakerWindow time.Duration
}

// Back-pressure defaults.
const (
	DefaultPause           = pipeline.DefaultPause // 5s
	DefaultMaxPause        = 5 * time.Minute
	DefaultBreakerFailures = 20
	DefaultBreakerRatio    = 0.5
	DefaultBreakerWindow   = 30 * time.Second
)

// withDefaults fills bp's zero values and checks it.
func (bp BackPressure) withDefaults() (BackPressure, error) {
	var errs []error
	if bp.Pause < 0 || bp.MaxPause < 0 || bp.BreakerWindow < 0 || bp.BreakerFailures < 0 {
		errs = append(errs, fmt.Errorf("consumer: BackPressure: Pause (%s), MaxPause (%s), BreakerWindow (%s) and BreakerFailures (%d) must not be negative",
			bp.Pause, bp.MaxPause, bp.BreakerWindow, bp.BreakerFailures))
	}
	if bp.BreakerRatio < 0 || bp.BreakerRatio > 1 || math.IsNaN(bp.BreakerRatio) {
		errs = append(errs, fmt.Errorf("consumer: BackPressure.BreakerRatio %v must be from 0 to 1 (0: the default, %v)", bp.BreakerRatio, DefaultBreakerRatio))
	}
	if bp.Pause == 0 {
		bp.Pause = DefaultPause
	}
	if bp.MaxPause == 0 {
		bp.MaxPause = max(DefaultMaxPause, bp.Pause)
	}
	if bp.MaxPause < bp.Pause {
		errs = append(errs, fmt.Errorf("consumer: BackPressure.MaxPause (%s) must not be shorter than Pause (%s)", bp.MaxPause, bp.Pause))
	}
	if bp.BreakerFailures == 0 {
		bp.BreakerFailures = DefaultBreakerFailures
	}
	if bp.BreakerRatio == 0 {
		bp.BreakerRatio = DefaultBreakerRatio
	}
	if bp.BreakerWindow == 0 {
		bp.BreakerWindow = DefaultBreakerWindow
	}
	return bp, errors.Join(errs...)
}

// Reasons a consumer pauses ([Pause.Reason]; [sqsmsg.PauseUnavailable],
// [sqsmsg.PauseBreaker]).
const (
	PauseUnavailable = sqsmsg.PauseUnavailable // a handler said Unavailable
	PauseBreaker     = sqsmsg.PauseBreaker     // the breaker opened, or a probe failed transiently
)

// Pause is one pause of a consumer, as [PauseObserver.Paused] reports it
// ([sqsmsg.Pause]).
type Pause = sqsmsg.Pause

// PauseObserver is implemented by an [Observer] that is told of the
// consumer's pauses ([sqsmsg.PauseObserver]); [NopObserver] implements it.
type PauseObserver = sqsmsg.PauseObserver

// UnavailableError says that the downstream a handler calls is
// unavailable ([sqsmsg.UnavailableError]).
type UnavailableError = sqsmsg.UnavailableError

// Unavailable says that the downstream the handler calls is unavailable,
// and when it said to come back (0: it did not say): the message is
// retried then, never dead-lettered for it, and the consumer pauses
// ([sqsmsg.Unavailable]; see [BackPressure]).
func Unavailable(err error, retryAfter time.Duration) error {
	return sqsmsg.Unavailable(err, retryAfter)
}

// ClassUnavailable is the class of a retry whose handler said its
// downstream is unavailable ([sqsmsg.ClassUnavailable]).
const ClassUnavailable = sqsmsg.ClassUnavailable

// RateLimited says that the downstream the handler calls asks its callers
// to slow down (an HTTP 429), and when to come back: [Unavailable] with a
// mark, which lowers an adaptive rate ([Limits].Adaptive) too
// ([sqsmsg.RateLimited]).
func RateLimited(err error, retryAfter time.Duration) error {
	return sqsmsg.RateLimited(err, retryAfter)
}

// ClassRateLimited is the class a [Classifier] gives an error that says
// the downstream asks to slow down: it has the effect of [RateLimited]
// ([sqsmsg.ClassRateLimited]).
const ClassRateLimited = sqsmsg.ClassRateLimited
