// Package consumertest runs handlers through the consumer's real
// per-message path (key, middleware, panic recovery, classification)
// without AWS, so tests can assert on the outcome a message would get and
// on the dead letter the consumer would send.
//
//	func TestHandler(t *testing.T) {
//		res := consumertest.Process(context.Background(), myHandler,
//			consumertest.NewMessage(`{"id":1}`, consumertest.WithAttribute("sqsonce-id", "job-1")))
//		if res.Outcome != consumer.OutcomeAck {
//			t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
//		}
//	}
package consumertest

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/internal/settle"
)

// Default queue URLs used when a Harness leaves them empty.
const (
	DefaultQueueURL           = "https://sqs.us-east-1.amazonaws.com/123456789012/test"
	DefaultDeadLetterQueueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/test-dlq"
)

var seq atomic.Int64

// MessageOption shapes a message built by NewMessage.
type MessageOption func(*types.Message)

// WithID sets the SQS MessageId. Defaults to a unique "msg-N".
func WithID(id string) MessageOption {
	return func(m *types.Message) { m.MessageId = aws.String(id) }
}

// WithAttribute adds a String message attribute.
func WithAttribute(name, value string) MessageOption {
	return func(m *types.Message) {
		if m.MessageAttributes == nil {
			m.MessageAttributes = map[string]types.MessageAttributeValue{}
		}
		m.MessageAttributes[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(value)}
	}
}

// WithReceiveCount sets ApproximateReceiveCount (1 by default).
func WithReceiveCount(n int) MessageOption {
	return WithSystemAttribute(string(types.MessageSystemAttributeNameApproximateReceiveCount), strconv.Itoa(n))
}

// WithGroup sets the FIFO MessageGroupId.
func WithGroup(group string) MessageOption {
	return WithSystemAttribute(string(types.MessageSystemAttributeNameMessageGroupId), group)
}

// WithSystemAttribute sets an SQS system attribute.
func WithSystemAttribute(name, value string) MessageOption {
	return func(m *types.Message) { m.Attributes[name] = value }
}

// NewMessage builds a message as the consumer would receive it from
// DefaultQueueURL: a unique MessageId and receipt handle, receive count 1,
// SentTimestamp now.
func NewMessage(body string, opts ...MessageOption) *consumer.Message {
	n := seq.Add(1)
	raw := types.Message{
		MessageId:     aws.String(fmt.Sprintf("msg-%d", n)),
		ReceiptHandle: aws.String(fmt.Sprintf("handle-%d", n)),
		Body:          aws.String(body),
		Attributes: map[string]string{
			string(types.MessageSystemAttributeNameApproximateReceiveCount): "1",
			string(types.MessageSystemAttributeNameSentTimestamp):           strconv.FormatInt(time.Now().UnixMilli(), 10),
		},
	}
	for _, o := range opts {
		o(&raw)
	}
	return delivery.New(raw, DefaultQueueURL, time.Now())
}

// Harness runs messages through the consumer's per-message path,
// configured as a Consumer with the same Config would be.
type Harness struct {
	// Config is the consumer's configuration. Handler is required;
	// Middleware, Classifier, KeyFunc, Backoff, MaxAttempts, Logger,
	// Observer and NowFunc mean what they mean to a Consumer. QueueURL and
	// DeadLetterQueueURL name the queues in dead letters; they default to
	// DefaultQueueURL and DefaultDeadLetterQueueURL. Client and the
	// polling settings are not used.
	Config consumer.Config
	// FIFO builds dead letters for a FIFO dead-letter queue.
	FIFO bool
}

// New returns a Harness for cfg.
func New(cfg consumer.Config) *Harness { return &Harness{Config: cfg} }

// Result is the consumer's decision for one message.
type Result struct {
	consumer.Result
	// DeadLetter is the SendMessage input the consumer would send to the
	// dead-letter queue (OutcomeDeadLetter only).
	DeadLetter *sqs.SendMessageInput
	// Failure is the sqsonce-failure attribute of DeadLetter, decoded.
	Failure *deadletter.Failure
}

// Process runs msg through the pipeline with ctx (cancel it with cause
// consumer.ErrShutdown to see a release).
func (h *Harness) Process(ctx context.Context, msg *consumer.Message) Result {
	cfg := h.Config
	res := Result{Result: pipeline.New(pipeline.Config{
		Handler:     cfg.Handler,
		Middleware:  cfg.Middleware,
		Classifier:  cfg.Classifier,
		Backoff:     cfg.Backoff,
		MaxAttempts: cfg.MaxAttempts,
		KeyFunc:     cfg.KeyFunc,
		Logger:      cfg.Logger,
		Observer:    cfg.Observer,
		Payload:     cfg.Payload,
	}).Process(ctx, msg)}
	if res.Outcome == consumer.OutcomeDeadLetter {
		now := time.Now
		if cfg.NowFunc != nil {
			now = cfg.NowFunc
		}
		reason := res.Reason
		if reason == "" && res.Err != nil {
			reason = res.Err.Error()
		}
		m := settle.Message{ID: msg.ID, Body: msg.Body, Key: msg.Key(), GroupID: msg.GroupID, ReceiveCount: msg.ReceiveCount, Attributes: msg.Attributes}
		res.DeadLetter = settle.DeadLetterInput(m, reason, res.Class,
			cmp.Or(cfg.QueueURL, DefaultQueueURL), cmp.Or(cfg.DeadLetterQueueURL, DefaultDeadLetterQueueURL), h.FIFO, now())
		settle.SetStep(res.DeadLetter, settle.Step(res.Err))
		if f, ok := deadletter.ParseFailure(res.DeadLetter.MessageAttributes); ok {
			res.Failure = &f
		}
	}
	return res
}

// Process runs msg through handler h, wrapped in mw, with the default
// classifier, and returns the outcome.
func Process(ctx context.Context, h consumer.Handler, msg *consumer.Message, mw ...consumer.Middleware) Result {
	return New(consumer.Config{Handler: h, Middleware: mw}).Process(ctx, msg)
}

// DeadLetter builds the consumer.Message the dead-letter queue would
// deliver for r (nil unless r.Outcome is OutcomeDeadLetter), so a test can
// feed it to a redrive or inspection path.
func DeadLetter(r Result) *consumer.Message {
	if r.DeadLetter == nil {
		return nil
	}
	n := seq.Add(1)
	raw := types.Message{
		MessageId:         aws.String(fmt.Sprintf("dlq-msg-%d", n)),
		ReceiptHandle:     aws.String(fmt.Sprintf("dlq-handle-%d", n)),
		Body:              r.DeadLetter.MessageBody,
		MessageAttributes: r.DeadLetter.MessageAttributes,
		Attributes: map[string]string{
			string(types.MessageSystemAttributeNameApproximateReceiveCount): "1",
		},
	}
	if g := aws.ToString(r.DeadLetter.MessageGroupId); g != "" {
		raw.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)] = g
	}
	return delivery.New(raw, aws.ToString(r.DeadLetter.QueueUrl), time.Now())
}
