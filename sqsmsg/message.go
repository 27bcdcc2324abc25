package sqsmsg

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/msgstate"
)

// AttrID is the message attribute that carries a message's dedupe id
// (deadletter.AttrID). Producers that care about exactly-once stamp it (a
// UUID made when the job is created); the redrive tool keeps it; every
// dead letter carries one.
const AttrID = deadletter.AttrID

// AttrNotBefore is the message attribute that carries a message's
// not-before time (producer.Message.NotBefore; see "Delays beyond 15
// minutes" in docs/large-messages.md). A message received before that
// time is not run but held ([OutcomeHold]): its visibility is set to the
// time left, at most once per copy, or a fresh copy is sent delayed by
// up to 15 minutes and this one deleted. It runs once received at or
// after its time, its handler seeing it as first sent: the body and
// attributes as sent, [Message.ID] and [Message.SentAt] the first copy's.
const AttrNotBefore = hold.Attr

// state is embedded in Message under an unexported name: what only the
// runtimes write (see internal/msgstate).
type state = msgstate.State

// Message is one received SQS message.
type Message struct {
	// ID is the SQS MessageId. For a message held past its not-before
	// time by re-sending it ([AttrNotBefore]), it is the first copy's, as
	// the producer's Result named it ([Message.Raw] is the copy received).
	ID string
	// Body is the message body as its producer sent it. For a message
	// whose body was stored in S3 or compressed (see [PayloadConfig]) it
	// is the fetched, decompressed body, read before the handler runs;
	// [Message.WireBody] is what SQS carried. Otherwise it is SQS's body,
	// unchanged.
	Body string
	// Attributes are the message attributes the producer set.
	Attributes map[string]types.MessageAttributeValue
	// SystemAttributes are SQS's attributes (ApproximateReceiveCount,
	// SentTimestamp, MessageGroupId, ...), keyed by name.
	SystemAttributes map[string]string
	// ReceiveCount is ApproximateReceiveCount (1 on the first delivery).
	// On a FIFO queue it also counts the receives in which the message
	// waited behind an earlier message of its group and did not run:
	// [Message.Attempt] leaves those out.
	ReceiveCount int
	// SentAt is SentTimestamp; zero when SQS did not send it. For a
	// re-sent copy of a held message, the first copy's.
	SentAt time.Time
	// GroupID is the FIFO MessageGroupId; empty on standard queues.
	GroupID string
	// DeduplicationID is the FIFO MessageDeduplicationId.
	DeduplicationID string
	// ReceivedAt is when this process received the message.
	ReceivedAt time.Time
	// QueueURL is the queue the message was received from.
	QueueURL string
	// Raw is the SDK's message as received. Treat it as read-only: the
	// consumer deletes (or changes the visibility of) the message by
	// Raw.ReceiptHandle.
	Raw types.Message

	state
}

// WireBody is the body as SQS carried it: for a message whose body was
// stored in S3 or compressed, the pointer or the compressed text (what a
// dead letter keeps, and what a redrive moves); otherwise [Message.Body].
func (m *Message) WireBody() string {
	if wire, ok := msgstate.Wire(&m.state); ok {
		return wire
	}
	return m.Body
}

// Attempt is how many times the message has run, this run included (1
// on the first): its ReceiveCount less the receives in which the consumer
// knows it did not run (on a FIFO queue, received behind an earlier
// message of its group that was then retried, so put back with it). The
// consumer's Backoff and MaxAttempts count attempts. Only the consumer
// process that put the message back knows: one received next by another
// process, or after a restart, counts those receives as attempts, as
// ReceiveCount does. Outside the consumer (the Lambda adapter,
// consumertest) it is ReceiveCount. In both, the receive in which a copy
// was held until its not-before time ([AttrNotBefore]; its
// ApproximateFirstReceiveTimestamp is before that time) is left out. It
// is at least 1.
func (m *Message) Attempt() int { return max(m.ReceiveCount-msgstate.Unrun(&m.state), 1) }

// Key is the message's dedupe id, as the consumer's KeyFunc returned it
// (without any store namespace); [DefaultKey] when it returned "".
func (m *Message) Key() string { return msgstate.Key(&m.state) }

// Attribute returns the string value of a message attribute, or "".
func (m *Message) Attribute(name string) string {
	if v, ok := m.Attributes[name]; ok {
		return aws.ToString(v.StringValue)
	}
	return ""
}

// OnHeartbeat registers fn to run on every heartbeat tick while the message's
// handler runs (the dedupe middleware extends its lease this way). When fn
// returns an error (or panics: the panic is recovered and logged) the
// handler's context is cancelled with a cause that wraps [ErrLeaseLost]
// and the error. fn must return quickly.
func (m *Message) OnHeartbeat(fn func(context.Context) error) { msgstate.OnHeartbeat(&m.state, fn) }

// HeartbeatInterval is the time between heartbeat ticks, each of which runs
// the functions registered with [Message.OnHeartbeat]: the consumer's
// heartbeat interval. It is 0 when nothing runs them (the Lambda adapter,
// consumertest), so a lease must then cover the whole run.
func (m *Message) HeartbeatInterval() time.Duration { return msgstate.BeatEvery(&m.state) }

// KeyFunc returns a message's dedupe id; "" means "use [DefaultKey]".
type KeyFunc func(*Message) string

// DefaultKey is the sqsonce-id message attribute when present, else the SQS
// MessageId.
func DefaultKey(m *Message) string {
	if id := m.Attribute(AttrID); id != "" {
		return id
	}
	return m.ID
}
