package redrive

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// ClassNone is the class of a dead letter that carries no sqsonce-failure
// attribute (one SQS moved after maxReceiveCount, for example).
const ClassNone = "none"

// Entry is one dead letter as the redrive tool sees it.
type Entry struct {
	// Message is the received message.
	Message *sqsmsg.Message
	// Failure is its parsed sqsonce-failure attribute, nil when absent.
	Failure *deadletter.Failure
	// Age is the time since the failure was recorded (failed_at), or since
	// the message was sent to the DLQ when it has no failure record.
	Age time.Duration
	// History is its parsed [AttrRedrive] attribute (how many times it was
	// redriven, when, out of which DLQ): nil when it has none or the
	// attribute is not a history. Like every attribute it is outside
	// input: a producer can write any history.
	History *History
}

// Class returns the failure class, or [ClassNone].
func (e Entry) Class() string {
	if e.Failure == nil || e.Failure.Class == "" {
		return ClassNone
	}
	return e.Failure.Class
}

// Source returns the source queue the message records, as recorded: SQS's
// DeadLetterQueueSourceArn when SQS moved it here (a sender cannot set
// it), else its failure record's source_queue (a URL, which a producer can
// write); "" when it records neither. It is for people and filters: a
// move trusts only what [MoveOptions.To] says.
func (e Entry) Source() string {
	if arn := e.Message.SystemAttributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)]; arn != "" {
		return arn
	}
	if e.Failure != nil {
		return e.Failure.SourceQueue
	}
	return ""
}

// entry builds an Entry.
func (r *Redriver) entry(m *sqsmsg.Message) Entry {
	e := Entry{Message: m}
	at := m.SentAt
	if f, ok := deadletter.ParseFailure(m.Attributes); ok {
		e.Failure = &f
		if !f.FailedAt.IsZero() {
			at = f.FailedAt
		}
	}
	if !at.IsZero() {
		e.Age = max(0, r.now().Sub(at))
	}
	if s := m.Attribute(AttrRedrive); s != "" {
		if h, err := ParseHistory(s); err == nil {
			e.History = &h
		}
	}
	return e
}

// callTimeout bounds each send, delete and visibility call (as the
// consumer bounds its settle calls): a response lost on a reused
// connection must not hang the command.
const callTimeout = 20 * time.Second

// receiveMargin is added to the long-poll wait to bound a receive.
const receiveMargin = 10 * time.Second

// receive receives up to n messages (n ≤ 10) with every attribute. Each
// call is bounded by the long-poll wait plus receiveMargin; one that fails
// or runs out is tried once more. On a FIFO queue both tries carry the same
// ReceiveRequestAttemptId, so a retry after a lost response gets the same
// messages back instead of finding their groups locked; on a standard
// queue the messages of a lost response come back after their visibility
// timeout, which the pass waits for.
func (r *Redriver) receive(ctx context.Context, q Queue, n int) (msgs []types.Message, err error) {
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.URL),
		MaxNumberOfMessages:         int32(min(max(n, 1), sqslimits.MaxBatchEntries)),
		WaitTimeSeconds:             int32(r.wait / time.Second),
		VisibilityTimeout:           int32(r.vis / time.Second),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	}
	if q.FIFO {
		in.ReceiveRequestAttemptId = aws.String(newRunID())
	}
	for attempt := 0; attempt < 2; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, r.wait+receiveMargin)
		var out *sqs.ReceiveMessageOutput
		out, err = r.client.ReceiveMessage(cctx, in, sdkhttp.SQS)
		cancel()
		if err == nil {
			return out.Messages, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		r.log.Warn("redrive: receive failed; trying once more", zap.String("queue", q.Name), zap.Error(err))
	}
	return nil, err
}

// release makes messages visible again at once (visibility 0), in batches
// of 10. It runs even when ctx is cancelled, so that an interrupted command
// still hands back what it held; it returns how many could not be released
// (they reappear when their visibility timeout ends).
func (r *Redriver) release(ctx context.Context, q Queue, handles []string) int {
	return r.setVisibility(ctx, q, handles, 0)
}

// setVisibility changes the visibility of messages in batches of 10.
func (r *Redriver) setVisibility(ctx context.Context, q Queue, handles []string, seconds int32) int {
	ctx = context.WithoutCancel(ctx)
	failed := 0
	for chunk := range chunks(handles, sqslimits.MaxBatchEntries) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, h := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(batchID(i)), ReceiptHandle: aws.String(h), VisibilityTimeout: seconds}
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := r.client.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.URL), Entries: entries}, sdkhttp.SQS)
		cancel()
		if err != nil {
			failed += len(chunk)
			r.log.Warn("redrive: change visibility", zap.String("queue", q.Name), zap.Int("messages", len(chunk)), zap.Error(err))
			continue
		}
		failed += len(out.Failed)
	}
	if failed > 0 {
		r.log.Warn("redrive: some visibility changes failed; those messages come back when their visibility timeout ends",
			zap.String("queue", q.Name), zap.Int("failed", failed), zap.Int32("visibility_seconds", seconds))
	}
	return failed
}

// chunks yields s in pieces of at most n.
func chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

// batchID is the Id of the i-th entry of a batch request.
func batchID(i int) string { return "e" + itoa(i) }

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
