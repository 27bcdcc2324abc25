// Package settle is the one settle path of the long-poll consumer and the
// Lambda adapter: from a processed message's outcome it decides whether
// the message is done or comes back (and when), sends dead letters (and
// decides what happens when SQS will not take one), and finds the
// dead-letter queue. The runtimes only carry the decision out: the
// consumer with batched deletes and visibility changes, the Lambda
// adapter with its partial batch response. See "Errors → outcomes" in
// docs/architecture.md.
package settle

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// Outcome is how a processed message ends: [sqsmsg.Outcome].
type Outcome = sqsmsg.Outcome

// The outcomes, by their short names here.
const (
	Ack        = sqsmsg.OutcomeAck
	Duplicate  = sqsmsg.OutcomeDuplicate
	Retry      = sqsmsg.OutcomeRetry
	DeadLetter = sqsmsg.OutcomeDeadLetter
	Release    = sqsmsg.OutcomeRelease
	// Held: received before its not-before time and held (see [Hold]);
	// the runtimes settle it themselves, never through [Decide].
	Held = sqsmsg.OutcomeHold
)

// Action is how to settle a message.
type Action struct {
	// Done: the message is finished. The consumer deletes it; the Lambda
	// adapter reports it as a success (the event source mapping deletes
	// it).
	Done bool
	// Visibility is the visibility timeout to set, in seconds, when not
	// Done: the message comes back then (the Lambda adapter also reports it
	// as a batch item failure).
	Visibility int32
}

// Decide returns how to settle a message whose outcome is o. delay is the
// retry delay of Retry; received is when the receive that returned the
// message's handle returned, now the time of the settle: a retry's
// visibility is kept within SQS's 12 hours from the receive. A
// DeadLetter outcome is Done: call it only once the dead letter was sent
// (see [DeadLetterFailed] otherwise). Any unknown outcome is released,
// never deleted.
func Decide(o Outcome, delay time.Duration, received, now time.Time) Action {
	switch o {
	case Ack, Duplicate, DeadLetter:
		return Action{Done: true}
	case Retry:
		return Action{Visibility: VisibilitySeconds(delay, received, now)}
	}
	return Action{}
}

// LeaveLost reports whether a message whose visibility was lost while it
// ran (the heartbeat found its receipt handle gone, or a lease extension
// failed and cancelled its handler with consumer.ErrLeaseLost), and whose
// outcome is o, is left alone: not dead-lettered, not deleted, its
// visibility not changed; in Lambda it is reported as a batch item
// failure, so that the event source mapping does not delete it either.
// The message is visible again or held by another consumer, which decides
// its fate: a dead letter sent now would copy a message that may yet
// succeed there, and a settle with the old handle could act on the other
// consumer's receive. Only an ack or a duplicate is still settled: the
// effect happened, and a delete with an old handle at worst does nothing.
func LeaveLost(o Outcome) bool { return o != Ack && o != Duplicate }

// StopsGroup reports whether a message of a FIFO group that ends with o
// stops its group: the group's later messages must not run before it
// comes back (they are put back, see [Behind]), so the group keeps its
// order. A dead-lettered message is finished, as an acked one: the
// group's later messages run (SQS's own move to the dead-letter queue
// lets them through too), rather than being put back to come back at
// once, each return a receive counted against them.
func StopsGroup(o Outcome) bool { return o == Retry || o == Release }

// Behind returns how to settle a message of a FIFO group that was not
// run because an earlier message of its group, received with it, ended
// with o (see [StopsGroup]) and delay. After a Retry it is kept invisible
// for the same delay (kept within SQS's 12 hours from its own receive, as
// [Decide] does), so that the group comes back together, the retried
// message first: SQS keeps a group locked while any of its messages is in
// flight, so neither can come back alone. Otherwise it is visible again
// at once.
//
// Either way SQS counts the receive against the message although it did
// not run: see [Unrun] and "FIFO queues" in docs/architecture.md for how
// a queue's maxReceiveCount must allow for it.
func Behind(o Outcome, delay time.Duration, received, now time.Time) Action {
	if o == Retry {
		return Action{Visibility: VisibilitySeconds(delay, received, now)}
	}
	return Action{}
}

// AtReceiveLimit reports whether a message received receiveCount times
// is at its last receive: SQS moves it to the dead-letter queue on the
// next, by the queue's RedrivePolicy maxReceiveCount (0: none).
func AtReceiveLimit(receiveCount, maxReceiveCount int) bool {
	return maxReceiveCount > 0 && receiveCount >= maxReceiveCount
}

// capSlack is kept off what is left of SQS's 12 hours: the visibility
// change reaches SQS after the decision (the consumer batches it for up
// to its FlushInterval, and the call itself takes time), and SQS refuses
// one that would end past the 12 hours, leaving the message to come back
// when its current visibility ends instead. A minute covers the batching
// and a slow call; the retry comes back a minute early at worst.
const capSlack = time.Minute

// VisibilitySeconds turns a retry delay into whole seconds, rounded up,
// and kept within SQS's 12 hours from received (at now), less a minute
// for the change to reach SQS: a longer one is refused by SQS.
func VisibilitySeconds(d time.Duration, received, now time.Time) int32 {
	if d <= 0 {
		return 0
	}
	secs := (d + time.Second - 1) / time.Second
	left := (sqslimits.MaxVisibility - capSlack - now.Sub(received)) / time.Second
	return int32(max(min(secs, left), 0))
}

// Backoff is the retry policy of a runtime: consumer.Backoff.
type Backoff interface {
	Delay(attempt int) time.Duration
	Ceiling(attempt int) time.Duration
}

// DeadLetterFailed decides what happens to a message whose dead letter
// could not be sent (err is the send's error), and logs it at error level
// with the prefix naming the runtime: it is not deleted but retried, after
// the backoff's delay for its attempt, or after the backoff's ceiling when
// SQS refused the dead letter (refused: sending it again cannot help, so
// the message is left to the queue's maxReceiveCount, never retried in a
// tight loop).
func DeadLetterFailed(log *zap.Logger, prefix string, m Message, dlq string, err error, b Backoff) (delay time.Duration, refused bool) {
	attempt := m.attempts()
	if errors.Is(err, ErrDeadLetterRefused) {
		log.Error(prefix+": dead letter refused by SQS; the message is retried after a backoff and left to the queue's maxReceiveCount",
			zap.String("message_id", m.ID), zap.String("key", m.Key), zap.String("dlq_url", dlq),
			zap.Int("receive_count", m.ReceiveCount), zap.Error(err))
		return b.Ceiling(attempt), true
	}
	log.Error(prefix+": dead-letter send failed; the message is retried later",
		zap.String("message_id", m.ID), zap.String("key", m.Key), zap.String("dlq_url", dlq), zap.Error(err))
	return b.Delay(attempt), false
}
