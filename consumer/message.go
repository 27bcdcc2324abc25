package consumer

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/payload"
)

// AttrID is the message attribute that carries a message's dedupe id
// (deadletter.AttrID). Producers that care about exactly-once stamp it (a
// UUID made when the job is created); the redrive tool keeps it; every
// dead letter carries one.
const AttrID = deadletter.AttrID

// Message is one received SQS message.
type Message struct {
	// ID is the SQS MessageId.
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
	// SentAt is SentTimestamp; zero when SQS did not send it.
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

	key string

	// wire is the body SQS carried, when decoded says Body was read from
	// S3 or decompressed (see decode).
	wire    string
	decoded bool
	// object is the S3 object the body is in; nil when it was in the
	// message.
	object *payload.Pointer
	// dropObject: delete object once the message is deleted (an ack with
	// PayloadConfig.DeleteAfterAck).
	dropObject bool

	// unrun counts the receives in which the message did not run, as far
	// as this process knows (settle.Unrun): set by the consumer on FIFO
	// queues.
	unrun int

	beatEvery time.Duration // set by the consumer: see HeartbeatInterval

	mu    sync.Mutex
	beats []func(context.Context) error
	// run is the consumer's record of the message while its handler runs:
	// the first OnHeartbeat then has the consumer tick the message's
	// functions (see runner.watch). Nil before and after, and outside the
	// consumer.
	run *inflight
}

// NewMessage builds a Message from an SDK message received from queueURL at
// receivedAt. Its key is [DefaultKey] until [Message.SetKey] changes it.
func NewMessage(raw types.Message, queueURL string, receivedAt time.Time) *Message {
	m := new(Message)
	m.init(raw, queueURL, receivedAt)
	return m
}

// init fills in a zero m as NewMessage does: the consumer's record of a
// received message holds its Message, so that both take one allocation.
func (m *Message) init(raw types.Message, queueURL string, receivedAt time.Time) {
	m.ID = aws.ToString(raw.MessageId)
	m.Body = aws.ToString(raw.Body)
	m.Attributes = raw.MessageAttributes
	m.SystemAttributes = raw.Attributes
	m.ReceivedAt = receivedAt
	m.QueueURL = queueURL
	m.Raw = raw
	if m.Attributes == nil {
		m.Attributes = map[string]types.MessageAttributeValue{}
	}
	if m.SystemAttributes == nil {
		m.SystemAttributes = map[string]string{}
	}
	sa := m.SystemAttributes
	m.ReceiveCount, _ = strconv.Atoi(sa[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(sa[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms)
	}
	m.GroupID = sa[string(types.MessageSystemAttributeNameMessageGroupId)]
	m.DeduplicationID = sa[string(types.MessageSystemAttributeNameMessageDeduplicationId)]
	m.key = DefaultKey(m)
}

// WireBody is the body as SQS carried it: for a message whose body was
// stored in S3 or compressed, the pointer or the compressed text (what a
// dead letter keeps, and what a redrive moves); otherwise [Message.Body].
func (m *Message) WireBody() string {
	if m.decoded {
		return m.wire
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
// consumertest) it is ReceiveCount. It is at least 1.
func (m *Message) Attempt() int { return max(m.ReceiveCount-m.unrun, 1) }

// Key is the message's dedupe id, as the consumer's KeyFunc returned it
// (without any store namespace).
func (m *Message) Key() string { return m.key }

// SetKey sets the dedupe id; an empty key falls back to [DefaultKey]. The
// consumer calls it with its KeyFunc's result before the middleware runs.
func (m *Message) SetKey(key string) {
	if key == "" {
		key = DefaultKey(m)
	}
	m.key = key
}

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
func (m *Message) OnHeartbeat(fn func(context.Context) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.beats = append(m.beats, fn)
	if len(m.beats) == 1 && m.run != nil {
		m.run.r.watch(m.run) // under m.mu: see runner.watch
	}
}

// HeartbeatInterval is the time between heartbeat ticks, each of which runs
// the functions registered with [Message.OnHeartbeat]: the consumer's
// heartbeat interval. It is 0 when nothing runs them (the Lambda adapter,
// consumertest), so a lease must then cover the whole run.
func (m *Message) HeartbeatInterval() time.Duration { return m.beatEvery }

// heartbeats returns the functions registered with OnHeartbeat.
func (m *Message) heartbeats() []func(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]func(context.Context) error(nil), m.beats...)
}

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
