package consumer

import (
	"context"
	"errors"
	"fmt"
)

// FailureClasser is implemented by errors that name their own dead-letter
// class (the dedupe middleware's key-reuse error returns [ClassKeyReuse]).
// The default classifier dead-letters any error whose chain has one.
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
// the first that returns ok=true decides. Nil entries are skipped. Put
// [DefaultClassifier] last so every error gets a verdict.
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

// DefaultClassifier implements DESIGN's "Errors → outcomes" table. It
// always returns ok=true:
//
//   - nil → ack
//   - an error wrapping [ErrDuplicate] → duplicate (acked)
//   - an error with a FailureClass() string method → dead-letter with that class
//   - [RetryError] → retry after its Delay
//   - [PermanentError] → dead-letter, class "permanent"
//   - any other error (including a recovered panic) → retry after
//     backoff.Delay(ApproximateReceiveCount); once the receive count reaches
//     maxAttempts (when > 0) → dead-letter, class "max_attempts"
func DefaultClassifier(backoff Backoff, maxAttempts int) Classifier {
	return ClassifierFunc(func(_ context.Context, msg *Message, err error) (Verdict, bool) {
		if err == nil {
			return Verdict{Outcome: OutcomeAck}, true
		}
		if errors.Is(err, ErrDuplicate) {
			return Verdict{Outcome: OutcomeDuplicate}, true
		}
		var fc FailureClasser
		if errors.As(err, &fc) {
			if class := fc.FailureClass(); class != "" {
				return Verdict{Outcome: OutcomeDeadLetter, Class: class}, true
			}
		}
		var re *RetryError
		if errors.As(err, &re) {
			return Verdict{Outcome: OutcomeRetry, Delay: max(re.Delay, 0)}, true
		}
		var pe *PermanentError
		if errors.As(err, &pe) {
			return Verdict{Outcome: OutcomeDeadLetter, Class: ClassPermanent}, true
		}
		attempt := max(msg.ReceiveCount, 1)
		if maxAttempts > 0 && attempt >= maxAttempts {
			return Verdict{Outcome: OutcomeDeadLetter, Class: ClassMaxAttempts}, true
		}
		v := Verdict{Outcome: OutcomeRetry, Delay: backoff.Delay(attempt)}
		var panicErr *PanicError
		if errors.As(err, &panicErr) {
			v.Class = ClassPanic
		}
		return v, true
	})
}
