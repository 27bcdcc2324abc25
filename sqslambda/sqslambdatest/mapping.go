package sqslambdatest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
)

// SQSAPI is the part of the SQS client a Mapping uses. *sqs.Client
// satisfies it.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Defaults.
const (
	// DefaultBatchSize is the event source mapping's default batch size.
	DefaultBatchSize = 10
	// DefaultFunctionTimeout is the invocation deadline when
	// Config.FunctionTimeout is not set.
	DefaultFunctionTimeout = 30 * time.Second
	// DefaultWaitTime is how long a receive waits for messages when
	// Config.WaitTime is not set.
	DefaultWaitTime = time.Second
	// DefaultEmptyReceives is how many empty receives in a row end a
	// Drain when Config.EmptyReceives is not set.
	DefaultEmptyReceives = 3
)

// Limits of an SQS event source mapping's batch size.
const (
	maxBatchStandard = 10000
	maxBatchFIFO     = 10
	maxReceive       = 10 // messages per ReceiveMessage
)

// Config configures a [Mapping]. Client, QueueURL and HandleFunc are
// required.
type Config struct {
	// Client receives and deletes the queue's messages. Required.
	Client SQSAPI
	// QueueURL is the queue the mapping reads. Required.
	QueueURL string
	// HandleFunc is the function the mapping invokes: pass the Handle
	// method of an *sqslambda.Handler, or any function with Lambda's SQS
	// signature (one that posts the event to a function running under
	// AWS's Runtime Interface Emulator, say). Required.
	HandleFunc func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	// BatchSize is the most records in one event. Up to 10 on a FIFO
	// queue, 10000 on a standard queue (a batch over 10 is gathered from
	// several receives, until it is full or the queue has nothing more).
	// Defaults to DefaultBatchSize (10).
	BatchSize int
	// FunctionTimeout is the function's timeout: each invocation's context
	// ends this long after it starts. A function that returns after that
	// has timed out, and the whole batch fails as it does in Lambda. It
	// may not exceed the queue's visibility timeout (an event source
	// mapping refuses that). Defaults to DefaultFunctionTimeout (30s).
	FunctionTimeout time.Duration
	// WaitTime is the long poll of each receive, in whole seconds up to
	// 20s. The event source mapping polls for 20s; a test wants to learn
	// sooner that the queue is empty. Defaults to DefaultWaitTime (1s).
	WaitTime time.Duration
	// EmptyReceives is how many receives in a row must return nothing for
	// [Mapping.Drain] to stop. Make EmptyReceives × WaitTime longer than
	// the longest delay before a failed message comes back. Defaults to
	// DefaultEmptyReceives (3).
	EmptyReceives int
}

// Mapping acts as an SQS event source mapping with ReportBatchItemFailures
// on, reading a real queue (or an in-process fake of one): it receives a
// batch with the queue's visibility timeout, invokes the function with
// the event Lambda would build, and applies the partial batch response as
// the mapping does. It is safe for concurrent use: several Polls at once
// are several pollers of one mapping.
type Mapping struct {
	cfg  Config
	arn  string
	fifo bool
}

// New checks cfg and reads the queue's ARN, visibility timeout and kind.
// A queue whose visibility timeout is shorter than FunctionTimeout is an
// error, as it is when creating an event source mapping.
func New(ctx context.Context, cfg Config) (*Mapping, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("sqslambdatest: Config.Client is required")
	case cfg.QueueURL == "":
		return nil, errors.New("sqslambdatest: Config.QueueURL is required")
	case cfg.HandleFunc == nil:
		return nil, errors.New("sqslambdatest: Config.HandleFunc is required (the function's handler, e.g. (*sqslambda.Handler).Handle)")
	case cfg.BatchSize < 0:
		return nil, fmt.Errorf("sqslambdatest: Config.BatchSize %d is negative", cfg.BatchSize)
	case cfg.FunctionTimeout < 0:
		return nil, fmt.Errorf("sqslambdatest: Config.FunctionTimeout %s is negative", cfg.FunctionTimeout)
	case cfg.WaitTime < 0 || cfg.WaitTime > 20*time.Second || cfg.WaitTime%time.Second != 0:
		return nil, fmt.Errorf("sqslambdatest: Config.WaitTime %s must be whole seconds from 0 to 20s", cfg.WaitTime)
	case cfg.EmptyReceives < 0:
		return nil, fmt.Errorf("sqslambdatest: Config.EmptyReceives %d is negative", cfg.EmptyReceives)
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultBatchSize)
	cfg.FunctionTimeout = cmp.Or(cfg.FunctionTimeout, DefaultFunctionTimeout)
	if cfg.WaitTime == 0 {
		cfg.WaitTime = DefaultWaitTime
	}
	cfg.EmptyReceives = cmp.Or(cfg.EmptyReceives, DefaultEmptyReceives)

	out, err := cfg.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(cfg.QueueURL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameQueueArn,
			types.QueueAttributeNameVisibilityTimeout,
			types.QueueAttributeNameFifoQueue,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("sqslambdatest: read attributes of queue %s: %w", cfg.QueueURL, err)
	}
	m := &Mapping{
		cfg:  cfg,
		arn:  out.Attributes[string(types.QueueAttributeNameQueueArn)],
		fifo: out.Attributes[string(types.QueueAttributeNameFifoQueue)] == "true" || strings.HasSuffix(cfg.QueueURL, ".fifo"),
	}
	if m.arn == "" {
		return nil, fmt.Errorf("sqslambdatest: queue %s has no QueueArn attribute", cfg.QueueURL)
	}
	limit := maxBatchStandard
	if m.fifo {
		limit = maxBatchFIFO
	}
	if cfg.BatchSize > limit {
		return nil, fmt.Errorf("sqslambdatest: Config.BatchSize %d is over %d, the most an event source mapping takes from queue %s", cfg.BatchSize, limit, cfg.QueueURL)
	}
	s := out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)]
	secs, err := strconv.Atoi(s)
	if err != nil {
		return nil, fmt.Errorf("sqslambdatest: queue %s: VisibilityTimeout %q is not a number of seconds", cfg.QueueURL, s)
	}
	if vis := time.Duration(secs) * time.Second; vis < cfg.FunctionTimeout {
		return nil, fmt.Errorf("sqslambdatest: queue %s: its visibility timeout %s is less than Config.FunctionTimeout %s, which an event source mapping refuses: raise the queue's VisibilityTimeout (6 × the function timeout is advised) or lower FunctionTimeout",
			cfg.QueueURL, vis, cfg.FunctionTimeout)
	}
	return m, nil
}

// QueueARN returns the queue's ARN: the records' eventSourceARN.
func (m *Mapping) QueueARN() string { return m.arn }

// Errors that fail a whole batch, wrapped in Result.Err.
var (
	// ErrTimedOut: the function returned after its deadline
	// (Config.FunctionTimeout); Lambda would have stopped it.
	ErrTimedOut = errors.New("sqslambdatest: the function timed out")
	// ErrInvalidResponse: the partial batch response names an empty
	// itemIdentifier or one that is not a messageId of the batch.
	ErrInvalidResponse = errors.New("sqslambdatest: invalid partial batch response")
)

// Result is what one invocation did.
type Result struct {
	// Event is the event the function was given.
	Event events.SQSEvent
	// Response is what the function returned.
	Response events.SQSEventResponse
	// Err is why the whole batch failed, nil when the response was
	// applied: the function's error, a panic, ErrTimedOut, or
	// ErrInvalidResponse (as AWS documents, an empty itemIdentifier or one
	// not in the batch fails the whole batch).
	Err error
	// Invoked holds the messageIds of the event's records, in order.
	Invoked []string
	// Failed holds the messageIds left on the queue, to come back when
	// their visibility ends (the queue's timeout, or what the function set
	// with ChangeMessageVisibility): the batch item failures, or every
	// record when Err is set.
	Failed []string
	// Deleted holds the messageIds the mapping deleted: the records not in
	// Failed, less any whose delete failed (see the error of Poll).
	Deleted []string
	// OutOfOrder holds, on a FIFO queue, the messageIds deleted although
	// an earlier record of their message group in the batch failed: the
	// queue's order is lost. A function must report a group's records
	// after its first failure as failures too; sqslambda does.
	OutOfOrder []string
}

// Poll does what the event source mapping does once: it receives up to
// BatchSize messages (every attribute asked for, the queue's own
// visibility timeout), invokes HandleFunc with their [Event] under a
// context that ends FunctionTimeout later and carries a
// lambdacontext.LambdaContext, then deletes the records that succeeded.
// The failures are left alone: they come back when their visibility ends.
//
// A receive that returns nothing invokes nothing: the Result has no
// Invoked. An error is the mapping's own (a receive or a delete that
// failed), never the function's: that one is in Result.Err.
func (m *Mapping) Poll(ctx context.Context) (Result, error) {
	msgs, err := m.receive(ctx)
	if err != nil || len(msgs) == 0 {
		return Result{}, err
	}
	r := Result{Event: Event(m.arn, msgs)}
	for _, rec := range r.Event.Records {
		r.Invoked = append(r.Invoked, rec.MessageId)
	}
	r.Response, r.Err = m.invoke(ctx, r.Event)
	if err := ctx.Err(); err != nil {
		// The test is ending: the result is not the function's.
		r.Failed = r.Invoked
		return r, fmt.Errorf("sqslambdatest: poll %s: %w", m.cfg.QueueURL, err)
	}
	failed := map[string]bool{}
	if r.Err == nil {
		r.Err = m.checkResponse(r.Event, r.Response)
	}
	if r.Err != nil {
		r.Failed = r.Invoked
		return r, nil
	}
	for _, f := range r.Response.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var del []events.SQSMessage
	for _, rec := range r.Event.Records {
		if failed[rec.MessageId] {
			r.Failed = append(r.Failed, rec.MessageId)
		} else {
			del = append(del, rec)
		}
	}
	r.OutOfOrder = m.outOfOrder(r.Event, failed)
	r.Deleted, err = m.delete(ctx, del)
	return r, err
}

// Drain polls until Config.EmptyReceives receives in a row returned
// nothing, and returns the result of every invocation. Messages that fail
// come back and are polled again when their visibility ends, if that is
// before the empty receives run out. It stops early with ctx's error, or
// with the first error of the mapping's own (see [Mapping.Poll]).
func (m *Mapping) Drain(ctx context.Context) ([]Result, error) {
	var out []Result
	for empty := 0; empty < m.cfg.EmptyReceives; {
		r, err := m.Poll(ctx)
		if len(r.Invoked) > 0 {
			out = append(out, r)
			empty = 0
		} else if err == nil {
			empty++
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// receive gathers one batch: one receive that long-polls, then, for a
// batch over 10, receives that do not wait until the batch is full or a
// receive returns nothing.
func (m *Mapping) receive(ctx context.Context) ([]types.Message, error) {
	var msgs []types.Message
	wait := int32(m.cfg.WaitTime / time.Second)
	for len(msgs) < m.cfg.BatchSize {
		out, err := m.cfg.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(m.cfg.QueueURL),
			MaxNumberOfMessages:         int32(min(maxReceive, m.cfg.BatchSize-len(msgs))),
			WaitTimeSeconds:             wait,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			// The messages received so far stay in flight until their
			// visibility ends, as when a poller stops.
			return nil, fmt.Errorf("sqslambdatest: receive from %s: %w", m.cfg.QueueURL, err)
		}
		msgs = append(msgs, out.Messages...)
		if len(out.Messages) == 0 || m.fifo {
			break
		}
		wait = 0
	}
	return msgs, nil
}

// invoke runs the function as Lambda would: with a deadline, a Lambda
// context, and a panic or an overrun deadline turned into an error.
func (m *Mapping) invoke(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	deadline := time.Now().Add(m.cfg.FunctionTimeout)
	ictx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{AwsRequestID: uuid.NewString()})
	defer func() {
		if p := recover(); p != nil {
			resp, err = events.SQSEventResponse{}, fmt.Errorf("sqslambdatest: the function panicked: %v", p)
		}
		if !time.Now().Before(deadline) {
			err = fmt.Errorf("%w after %s", ErrTimedOut, m.cfg.FunctionTimeout)
		}
	}()
	return m.cfg.HandleFunc(ictx, ev)
}

// checkResponse applies the rules AWS documents for a partial batch
// response: an empty itemIdentifier, or one that is not in the batch,
// fails the whole batch.
func (m *Mapping) checkResponse(ev events.SQSEvent, resp events.SQSEventResponse) error {
	ids := make(map[string]bool, len(ev.Records))
	for _, r := range ev.Records {
		ids[r.MessageId] = true
	}
	for i, f := range resp.BatchItemFailures {
		if f.ItemIdentifier == "" {
			return fmt.Errorf("%w: batchItemFailures[%d] has an empty itemIdentifier", ErrInvalidResponse, i)
		}
		if !ids[f.ItemIdentifier] {
			return fmt.Errorf("%w: batchItemFailures[%d] itemIdentifier %q is not a messageId of the batch", ErrInvalidResponse, i, f.ItemIdentifier)
		}
	}
	return nil
}

// outOfOrder returns the FIFO records that succeed after a failure of
// their message group in the batch.
func (m *Mapping) outOfOrder(ev events.SQSEvent, failed map[string]bool) []string {
	if !m.fifo {
		return nil
	}
	var out []string
	broken := map[string]bool{} // message groups with a failure so far
	for _, r := range ev.Records {
		g := r.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		switch {
		case failed[r.MessageId]:
			broken[g] = true
		case broken[g]:
			out = append(out, r.MessageId)
		}
	}
	return out
}

// delete deletes recs in batches of 10 and returns the messageIds
// deleted. Entries SQS refuses are reported in the error.
func (m *Mapping) delete(ctx context.Context, recs []events.SQSMessage) ([]string, error) {
	var deleted []string
	var errs []error
	for chunk := range slices.Chunk(recs, maxReceive) {
		in := &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.cfg.QueueURL)}
		for i, r := range chunk {
			in.Entries = append(in.Entries, types.DeleteMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle),
			})
		}
		out, err := m.cfg.Client.DeleteMessageBatch(ctx, in)
		if err != nil {
			errs = append(errs, fmt.Errorf("sqslambdatest: delete from %s: %w", m.cfg.QueueURL, err))
			continue
		}
		refused := map[string]bool{}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			if i >= 0 && i < len(chunk) {
				refused[aws.ToString(f.Id)] = true
				errs = append(errs, fmt.Errorf("sqslambdatest: delete message %s from %s: %s: %s",
					chunk[i].MessageId, m.cfg.QueueURL, aws.ToString(f.Code), aws.ToString(f.Message)))
			}
		}
		for i, r := range chunk {
			if !refused[strconv.Itoa(i)] {
				deleted = append(deleted, r.MessageId)
			}
		}
	}
	return deleted, errors.Join(errs...)
}
