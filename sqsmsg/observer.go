package sqsmsg

import "time"

// Observer receives a runtime's metrics events (the long-poll consumer's
// and the Lambda adapter's). Every method must return quickly and be safe
// for concurrent use. Embed [NopObserver] to implement only the methods
// you need. A panic in a method is recovered and logged at error level
// with its stack; the runtime goes on.
type Observer interface {
	// Received is called once per message received from SQS.
	Received(msg *Message)
	// HandlerDone is called when the middleware chain and handler return,
	// with the run time and the error (nil on success).
	HandlerDone(msg *Message, d time.Duration, err error)
	// Settled is called once per message when its outcome is decided.
	Settled(msg *Message, res Result)
	// HeartbeatFailed is called when extending the visibility of n messages
	// failed (the whole call, or n failed entries).
	HeartbeatFailed(n int, err error)
	// LeaseLost is called when a message's visibility or dedupe lease could
	// not be kept: its handler's context is cancelled.
	LeaseLost(msg *Message, err error)
	// DeadLettered is called after a send to the dead-letter queue; err is
	// nil when the send succeeded.
	DeadLettered(msg *Message, err error)
	// DeadLetterRefused is called when SQS refuses a message's dead letter
	// for good (too large for the dead-letter queue even once what sqsonce
	// adds was shrunk, or otherwise invalid): the message is not deleted
	// but retried after a backoff, and left to the queue's own
	// maxReceiveCount.
	DeadLetterRefused(msg *Message, err error)
	// SettleFailed is called when deleting a message (op "delete") or
	// changing its visibility (op "change visibility") still failed after
	// its retries. A failed delete is tried again later while the heartbeat
	// keeps the message invisible; it is reported each time it fails.
	SettleFailed(msg *Message, op string, err error)
	// ReceiveFailed is called when a ReceiveMessage call failed (not when
	// shutdown cut it short), with its error. The consumer retries after
	// a short backoff; receives that keep failing with an error retrying
	// cannot heal stop Run after consumer.Config.ReceiveErrorGrace.
	ReceiveFailed(err error)
}

// PauseObserver is implemented by an [Observer] that is told when the
// consumer pauses for an unavailable downstream and when it resumes (see
// consumer.BackPressure). It is apart from Observer so that an Observer written
// before it needs no change; [NopObserver] implements it, so one that
// embeds NopObserver overrides only what it needs.
type PauseObserver interface {
	// Paused is called when the consumer pauses: at the start of an
	// outage and after each failed probe.
	Paused(p Pause)
	// Resumed is called when a probe succeeded and the consumer is back at
	// full speed, with how long it was paused (from the first pause of the
	// outage).
	Resumed(pausedFor time.Duration)
}

// NopObserver implements [Observer] with methods that do nothing.
type NopObserver struct{}

// Received does nothing.
func (NopObserver) Received(*Message) {}

// HandlerDone does nothing.
func (NopObserver) HandlerDone(*Message, time.Duration, error) {}

// Settled does nothing.
func (NopObserver) Settled(*Message, Result) {}

// HeartbeatFailed does nothing.
func (NopObserver) HeartbeatFailed(int, error) {}

// LeaseLost does nothing.
func (NopObserver) LeaseLost(*Message, error) {}

// DeadLettered does nothing.
func (NopObserver) DeadLettered(*Message, error) {}

// DeadLetterRefused does nothing.
func (NopObserver) DeadLetterRefused(*Message, error) {}

// SettleFailed does nothing.
func (NopObserver) SettleFailed(*Message, string, error) {}

// ReceiveFailed does nothing.
func (NopObserver) ReceiveFailed(error) {}

// Paused does nothing.
func (NopObserver) Paused(Pause) {}

// Resumed does nothing.
func (NopObserver) Resumed(time.Duration) {}

var (
	_ Observer      = NopObserver{}
	_ PauseObserver = NopObserver{}
)

// Reasons a consumer pauses ([Pause.Reason]).
const (
	// PauseUnavailable: a handler returned [Unavailable] (or a Classifier
	// said [ClassUnavailable]).
	PauseUnavailable = "unavailable"
	// PauseBreaker: transient failures passed the circuit breaker's
	// threshold (see consumer.BackPressure), or a probe failed transiently.
	PauseBreaker = "breaker"
)

// Pause is one pause of a consumer, as [PauseObserver.Paused] reports it.
type Pause struct {
	// Reason is [PauseUnavailable] or [PauseBreaker].
	Reason string
	// Err is the handler's error that paused the consumer (nil when a
	// probe's receive found no message).
	Err error
	// For is how long the consumer waits before its probe.
	For time.Duration
	// Count is 1 for the first pause of an outage, and one more for each
	// pause since (after a failed probe, or a probe's receive that found
	// no message).
	Count int
}
