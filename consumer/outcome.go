package consumer

import (
	"context"
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
)

// String returns the outcome as logged: ack, duplicate, retry, dead_letter
// or release.
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
