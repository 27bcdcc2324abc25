package sqsfake

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// State is where a message stands in its queue.
type State string

// The states of a message.
const (
	Visible  State = "visible"  // can be received
	InFlight State = "inflight" // received, visibility timeout running
	Delayed  State = "delayed"  // sent with a delay not yet over
)

// Message is a snapshot of a message in a queue.
type Message struct {
	ID, Body        string
	Attributes      map[string]types.MessageAttributeValue
	GroupID         string // FIFO only
	DeduplicationID string // FIFO only
	SequenceNumber  string // FIFO only
	ReceiveCount    int
	State           State
	ReceiptHandle   string    // latest, "" if never received
	SentAt          time.Time // first send, kept by a move to the DLQ
	VisibleAt       time.Time // end of the delay or visibility timeout
}

// Sent is one message accepted into a queue, by a send or by a move (a
// source queue's RedrivePolicy, or a message move task). FIFO duplicates
// are not recorded.
type Sent struct {
	MessageID       string
	Body            string
	Attributes      map[string]types.MessageAttributeValue
	GroupID         string
	DeduplicationID string
	SequenceNumber  string
	DelaySeconds    int32
	At              time.Time
	MovedFrom       string // queue URL a move took it from, "" for a send
}

// VisibilityChange is one entry of ChangeMessageVisibility(Batch), applied
// or not.
type VisibilityChange struct {
	QueueURL  string
	MessageID string // "" for a handle the queue never issued
	Handle    string
	Seconds   int32
	At        time.Time
	Err       string // the error code, "" when applied
}

// AddQueue creates a queue (attrs as in CreateQueue, may be nil;
// FifoQueue is implied by a .fifo name) and returns its URL. It panics on invalid input: it is for test set-up. It is
// not counted in Calls and not seen by Inject.
func (f *Fake) AddQueue(name string, attrs map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasSuffix(name, ".fifo") && attrs["FifoQueue"] == "" {
		attrs = maps.Clone(attrs)
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs["FifoQueue"] = "true"
	}
	out, err := f.createQueue(name, attrs)
	if err != nil {
		panic("sqsfake: AddQueue " + name + ": " + err.Error())
	}
	return *out.QueueUrl
}

// Put sends body to a queue and returns the message id, panicking on
// error. On a FIFO queue group is the MessageGroupId and the body's
// SHA-256 is the deduplication id unless ContentBasedDeduplication is set.
// It is not counted in Calls and not seen by Inject.
func (f *Fake) Put(queueURL, body, group string) string {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}
	f.mu.Lock()
	defer f.mu.Unlock()
	q, err := f.queueByURL(in.QueueUrl)
	if err != nil {
		panic("sqsfake: Put: " + err.Error())
	}
	var g, d *string
	if q.fifo() {
		g = aws.String(group)
		if !q.contentDedupe() {
			d = aws.String(f.newMessageID())
		}
	}
	id, _, err := f.sendOne(q, in.MessageBody, 0, nil, nil, g, d)
	if err != nil {
		panic("sqsfake: Put: " + err.Error())
	}
	return id
}

// QueueURL returns the URL of the named queue, or "" if there is none.
func (f *Fake) QueueURL(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.queueByName(name); q != nil {
		return q.url
	}
	return ""
}

// Calls returns how many times op ("ReceiveMessage", ...) was called,
// including calls an injected Fault failed.
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Messages returns the live messages of a queue in send order (nil for an
// unknown queue), with their state at the fake's now.
func (f *Fake) Messages(queueURL string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[queueURL]
	if q == nil {
		return nil
	}
	now := time.Now()
	q.expire(now)
	out := make([]Message, 0, len(q.msgs))
	for _, m := range q.msgs {
		out = append(out, Message{
			ID: m.id, Body: m.body, Attributes: maps.Clone(m.attrs),
			GroupID: m.group, DeduplicationID: m.dedupeID, SequenceNumber: m.seqNum,
			ReceiveCount: m.receives, State: m.state(now), ReceiptHandle: m.handle,
			SentAt: m.sentAt, VisibleAt: m.availableAt,
		})
	}
	return out
}

// Sent returns every message accepted into a queue since it was created,
// deleted or not, in order.
func (f *Fake) Sent(queueURL string) []Sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.queues[queueURL]; q != nil {
		return slices.Clone(q.sent)
	}
	return nil
}

// VisibilityLog returns every visibility change asked of the fake, in order.
func (f *Fake) VisibilityLog() []VisibilityChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.visLog)
}

// Problems returns the contract violations seen: empty or oversized
// batches, invalid or duplicate entry ids, out-of-range MaxNumberOfMessages,
// WaitTimeSeconds or VisibilityTimeout. A test asserts it is empty.
func (f *Fake) Problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.problems)
}
