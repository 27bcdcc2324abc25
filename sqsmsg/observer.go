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

var _ Observer = NopObserver{}
