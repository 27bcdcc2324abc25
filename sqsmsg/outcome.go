package sqsmsg

import (
	"context"
	"fmt"
	"time"

	"github.com/sqsonce/sqsonce/deadletter"
)

// Outcome is how a received message ends. Every received message ends in
// exactly one.
type Outcome int

const (
	// OutcomeAck: deleted after success.
	OutcomeAck Outcome = iota + 1
	// OutcomeDuplicate: deleted because its effect already happened.
	OutcomeDuplicate
	// OutcomeRetry: visibility set to a backoff delay.
	OutcomeRetry
	// OutcomeDeadLetter: sent to the DLQ with its failure, then deleted.
	OutcomeDeadLetter
	// OutcomeRelease: not run, or its run cut short by shutdown, and put
	// back: visibility set to 0 (shutdown, or a FIFO group's later messages
	// after an earlier one was released), or to Result.Delay (a FIFO
	// group's later messages after an earlier one was retried: they come
	// back with it).
	OutcomeRelease
	// OutcomeHold: received before its not-before time (see
	// [AttrNotBefore]), not run, and held by SQS until then: its
	// visibility set to the time left, or a fresh copy sent delayed and
	// this one deleted once it was sent (see [Result.Resent]).
	OutcomeHold
)

// String returns the outcome as logged: ack, duplicate, retry,
// dead_letter, release or hold.
func (o Outcome) String() string {
	switch o {
	case OutcomeAck:
		return "ack"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeRetry:
		return "retry"
	case OutcomeDeadLetter:
		return "dead_letter"
	case OutcomeRelease:
		return "release"
	case OutcomeHold:
		return "hold"
	}
	return "unknown"
}

// Failure classes recorded in a dead letter's deadletter.Failure.Class.
const (
	ClassPermanent   = deadletter.ClassPermanent   // the handler returned Permanent(err)
	ClassMaxAttempts = deadletter.ClassMaxAttempts // MaxAttempts transient failures
	ClassPanic       = deadletter.ClassPanic       // counted as a transient failure; a dead letter only via MaxAttempts
	ClassKeyReuse    = deadletter.ClassKeyReuse    // same dedupe key, different body
	// ClassOutcomeUnknown: a step's outcome outside the database is
	// unknown and its policy parks it (package step).
	ClassOutcomeUnknown = deadletter.ClassOutcomeUnknown
)

// ClassUnavailable is the class of a retry whose handler said its
// downstream is unavailable ([Unavailable]). Never a dead letter: such a
// message is retried after the downstream's Retry-After or the runtime's
// pause, whatever its attempt, and the consumer pauses (see
// consumer.BackPressure). A [Classifier] that maps its own errors to a
// Verdict{Outcome: OutcomeRetry, Delay: retryAfter, Class:
// ClassUnavailable} has the same effect (a zero Delay: the pause).
const ClassUnavailable = "unavailable"

// ClassRateLimited is the class a [Classifier] gives (with OutcomeRetry
// and the downstream's Retry-After as Delay) to an error that says the
// downstream asks its callers to slow down: it has the effect of
// [RateLimited]. It is never recorded: the retry's class is
// [ClassUnavailable], and its Result is marked RateLimited.
const ClassRateLimited = "rate_limited"

// Verdict is a classifier's decision for one handler error.
type Verdict struct {
	Outcome Outcome
	// Delay is the visibility timeout for OutcomeRetry.
	Delay time.Duration
	// Class is the failure class for OutcomeDeadLetter (see ClassPermanent).
	Class string
}

// Classifier maps a handler's error to a Verdict. ok=false means "no
// opinion": the next classifier in the chain decides.
type Classifier interface {
	Classify(ctx context.Context, msg *Message, err error) (v Verdict, ok bool)
}

// ClassifierFunc adapts a function to [Classifier].
type ClassifierFunc func(ctx context.Context, msg *Message, err error) (Verdict, bool)

// Classify calls f.
func (f ClassifierFunc) Classify(ctx context.Context, msg *Message, err error) (Verdict, bool) {
	return f(ctx, msg, err)
}

// ClassifierChain returns a Classifier that asks each classifier in turn;
// the first that returns ok=true decides. Nil entries are skipped. When
// none decides, the chain has no opinion either, and the runtime's own
// classification decides with its Backoff and MaxAttempts (see
// consumer.Config.Classifier): a chain needs no catch-all at its end.
func ClassifierChain(cs ...Classifier) Classifier {
	return ClassifierFunc(func(ctx context.Context, msg *Message, err error) (Verdict, bool) {
		for _, c := range cs {
			if c == nil {
				continue
			}
			if v, ok := c.Classify(ctx, msg, err); ok {
				return v, true
			}
		}
		return Verdict{}, false
	})
}

// FailureClasser is implemented by errors that name their own dead-letter
// class (the dedupe middleware's key-reuse error returns [ClassKeyReuse]).
// The runtimes' classification dead-letters any error whose chain has one.
type FailureClasser interface {
	FailureClass() string
}

// PanicError is the failure a recovered handler panic becomes. It counts as
// a transient failure (class [ClassPanic]).
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Result is what processing one message decided.
type Result struct {
	// Outcome is how the message must be settled.
	Outcome Outcome
	// Delay is the visibility timeout to set for OutcomeRetry; for
	// OutcomeRelease, the one the consumer set (0, or an earlier retried
	// message's delay for a FIFO group's later messages).
	Delay time.Duration
	// Err is the handler's error (nil for a plain ack).
	Err error
	// Class is the failure class: for OutcomeDeadLetter the class recorded
	// in the dead letter ("permanent", "max_attempts", "key_reuse", ...);
	// for a retried panic "panic"; for a retry because the downstream is
	// unavailable [ClassUnavailable]; otherwise empty.
	Class string
	// Reason is the text recorded as the Error of the dead letter's
	// [deadletter.Failure]: the handler's error text, without the
	// "permanent: " or "retry after" prefix of [Permanent] and
	// [RetryAfter] (the class says it).
	Reason string
	// Duration is how long the middleware chain and handler ran.
	Duration time.Duration
	// NotBefore is, for OutcomeHold, the message's not-before time: when
	// it runs.
	NotBefore time.Time
	// Resent is set, for OutcomeHold, when the message was held by
	// sending a fresh copy (delayed by Delay) and deleting it; otherwise
	// its visibility was set to Delay.
	Resent bool
	// RetryAfter is, for [ClassUnavailable], the downstream's Retry-After
	// (0 when it gave none: Delay is then the pause). The consumer's pause
	// follows it.
	RetryAfter time.Duration
	// RateLimited is set, for [ClassUnavailable], when the downstream
	// asked to slow down ([RateLimited], or a Classifier's
	// [ClassRateLimited]): an adaptive rate (consumer.Limits.Adaptive)
	// follows it.
	RateLimited bool
}
