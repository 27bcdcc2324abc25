package pipeline

import (
	"errors"

	"github.com/sqsonce/sqsonce/sqsmsg"
)

// classedError is an error with a [sqsmsg.FailureClasser] method.
type classedError interface {
	error
	sqsmsg.FailureClasser
}

// defaultVerdict is the classification of every error the Classifier
// leaves undecided: the table of consumer.Config.Classifier (and the
// "Errors → outcomes" table of docs/architecture.md). It does not
// allocate: it runs for every failed message.
func defaultVerdict(backoff sqsmsg.Backoff, maxAttempts int, msg *sqsmsg.Message, err error) sqsmsg.Verdict {
	if err == nil {
		return sqsmsg.Verdict{Outcome: sqsmsg.OutcomeAck}
	}
	if errors.Is(err, sqsmsg.ErrDuplicate) {
		return sqsmsg.Verdict{Outcome: sqsmsg.OutcomeDuplicate}
	}
	if fc, ok := errors.AsType[classedError](err); ok {
		if class := fc.FailureClass(); class != "" {
			return sqsmsg.Verdict{Outcome: sqsmsg.OutcomeDeadLetter, Class: class}
		}
	}
	if re, ok := errors.AsType[*sqsmsg.RetryError](err); ok {
		return sqsmsg.Verdict{Outcome: sqsmsg.OutcomeRetry, Delay: max(re.Delay, 0)}
	}
	if _, ok := errors.AsType[*sqsmsg.PermanentError](err); ok {
		return sqsmsg.Verdict{Outcome: sqsmsg.OutcomeDeadLetter, Class: sqsmsg.ClassPermanent}
	}
	attempt := msg.Attempt()
	if maxAttempts > 0 && attempt >= maxAttempts {
		return sqsmsg.Verdict{Outcome: sqsmsg.OutcomeDeadLetter, Class: sqsmsg.ClassMaxAttempts}
	}
	v := sqsmsg.Verdict{Outcome: sqsmsg.OutcomeRetry, Delay: backoff.Delay(attempt)}
	if _, ok := errors.AsType[*sqsmsg.PanicError](err); ok {
		v.Class = sqsmsg.ClassPanic
	}
	return v
}
