package consumer

import (
	"context"
	"errors"
	"fmt"
)

// FailureClasser is implemented by errors that name their own dead-letter
// class (the dedupe middleware's key-reuse error returns [ClassKeyReuse]).
// The consumer's classification dead-letters any error whose chain has one.
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

// ClassifierChain returns a Classifier that asks each classifier in turn;
// the first that returns ok=true decides. Nil entries are skipped. When
// none decides, the chain has no opinion either, and the consumer's own
// classification decides with its Backoff and MaxAttempts (see
// [Config.Classifier]): a chain needs no catch-all at its end.
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

// classedError is an error with a [FailureClasser] method.
type classedError interface {
	error
	FailureClasser
}

// defaultVerdict is the classification of every error [Config.Classifier]
// leaves undecided: the table of [Config.Classifier] (and the "Errors →
// outcomes" table of docs/architecture.md); an [Unavailable] without a
// Retry-After has a zero Delay, which the caller fills with the pause. It
// does not allocate: it runs for every failed message.
func defaultVerdict(backoff Backoff, maxAttempts int, msg *Message, err error) Verdict {
	if err == nil {
		return Verdict{Outcome: OutcomeAck}
	}
	if errors.Is(err, ErrDuplicate) {
		return Verdict{Outcome: OutcomeDuplicate}
	}
	if fc, ok := errors.AsType[classedError](err); ok {
		if class := fc.FailureClass(); class != "" {
			return Verdict{Outcome: OutcomeDeadLetter, Class: class}
		}
	}
	if ue, ok := errors.AsType[*UnavailableError](err); ok {
		// Never a dead letter, whatever the attempt: the downstream failed,
		// not the message.
		return Verdict{Outcome: OutcomeRetry, Delay: ue.RetryAfter, Class: ClassUnavailable}
	}
	if re, ok := errors.AsType[*RetryError](err); ok {
		return Verdict{Outcome: OutcomeRetry, Delay: max(re.Delay, 0)}
	}
	if _, ok := errors.AsType[*PermanentError](err); ok {
		return Verdict{Outcome: OutcomeDeadLetter, Class: ClassPermanent}
	}
	attempt := msg.Attempt()
	if maxAttempts > 0 && attempt >= maxAttempts {
		return Verdict{Outcome: OutcomeDeadLetter, Class: ClassMaxAttempts}
	}
	v := Verdict{Outcome: OutcomeRetry, Delay: backoff.Delay(attempt)}
	if _, ok := errors.AsType[*PanicError](err); ok {
		v.Class = ClassPanic
	}
	return v
}
