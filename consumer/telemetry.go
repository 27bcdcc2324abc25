package consumer

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// instrument adds the OpenTelemetry instrumentation (the instruments are
// in internal/telemetry) to cfg when cfg.TracerProvider or
// cfg.MeterProvider is set: a process span per message, started by a
// middleware put before cfg.Middleware; the metrics, fed by a wrapper of
// cfg.Observer that also ends the spans; and, when cfg.Client is set,
// every SQS call counted and timed. queueURL names the queue in the
// metrics ("" leaves it out). With neither provider set it returns cfg
// unchanged, so telemetry off costs nothing.
//
// It is the one adapter from the per-message path's events to
// OpenTelemetry: the Lambda adapter uses it too, through
// internal/pipeline, so a metric or span attribute is defined once.
func instrument(cfg Config, queueURL string) Config {
	t := telemetry.NewConsumer(cfg.TracerProvider, cfg.MeterProvider, queueURL)
	if t == nil {
		return cfg
	}
	if cfg.Client != nil {
		cfg.Client = &tracedSQS{SQSAPI: cfg.Client, t: t}
	}
	cfg.Middleware = append([]Middleware{traceMiddleware(t)}, cfg.Middleware...)
	next := cfg.Observer
	if next == nil {
		next = NopObserver{}
	}
	cfg.Observer = &tracedObserver{next: next, t: t}
	return cfg
}

// traceMiddleware starts each message's process span, parented to the
// trace context in its attributes.
func traceMiddleware(t *telemetry.Consumer) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, msg *Message) error {
			ctx = t.Start(ctx, msg, msg.QueueURL, msg.Attributes, msg.ID, msg.Key(), msg.ReceiveCount)
			return next.Handle(ctx, msg)
		})
	}
}

// tracedObserver feeds the metrics and ends the spans, then calls next.
type tracedObserver struct {
	next Observer
	t    *telemetry.Consumer
}

func (o *tracedObserver) Received(msg *Message) {
	o.t.Received(context.Background())
	o.next.Received(msg)
}

func (o *tracedObserver) HandlerDone(msg *Message, d time.Duration, err error) {
	o.t.HandlerDone(context.Background(), d)
	o.next.HandlerDone(msg, d, err)
}

func (o *tracedObserver) Settled(msg *Message, res Result) {
	o.t.Settled(context.Background(), msg, res.Outcome.String(), res.Class, res.Err)
	// The held messages and the next one due (DefaultKey: the KeyFunc
	// has not run on a held message).
	switch _, marked := msg.Attributes[AttrNotBefore]; {
	case res.Outcome == OutcomeHold:
		how := "visibility"
		if res.Resent {
			how = "resend"
		}
		o.t.Held(context.Background(), DefaultKey(msg), how, res.NotBefore)
	case marked:
		o.t.HeldRan(context.Background(), DefaultKey(msg))
	}
	o.next.Settled(msg, res)
}

func (o *tracedObserver) HeartbeatFailed(n int, err error) {
	o.t.HeartbeatFailed(context.Background(), n)
	o.next.HeartbeatFailed(n, err)
}

func (o *tracedObserver) LeaseLost(msg *Message, err error) {
	o.t.LeaseLost(context.Background(), msg, err)
	o.next.LeaseLost(msg, err)
}

func (o *tracedObserver) DeadLettered(msg *Message, err error) {
	result := "sent"
	if err != nil {
		result = "failed"
	}
	o.t.DeadLettered(context.Background(), msg, result, err)
	o.next.DeadLettered(msg, err)
}

func (o *tracedObserver) DeadLetterRefused(msg *Message, err error) {
	o.t.DeadLettered(context.Background(), msg, "refused", err)
	o.next.DeadLetterRefused(msg, err)
}

func (o *tracedObserver) SettleFailed(msg *Message, op string, err error) {
	o.t.SettleFailed(context.Background(), op)
	o.next.SettleFailed(msg, op, err)
}

// ReceiveFailed passes the failure on: the metrics counted it already,
// as a failed ReceiveMessage call (tracedSQS).
func (o *tracedObserver) ReceiveFailed(err error) { o.next.ReceiveFailed(err) }

// tracedSQS counts and times every SQS call.
type tracedSQS struct {
	SQSAPI
	t *telemetry.Consumer
}

func (c *tracedSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	start := time.Now()
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, o...)
	n := 0
	if out != nil {
		n = len(out.Messages)
	}
	c.t.Call(ctx, "ReceiveMessage", time.Since(start), err, n)
	return out, err
}

func (c *tracedSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	start := time.Now()
	out, err := c.SQSAPI.DeleteMessage(ctx, in, o...)
	c.t.Call(ctx, "DeleteMessage", time.Since(start), err, -1)
	return out, err
}

func (c *tracedSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	start := time.Now()
	out, err := c.SQSAPI.DeleteMessageBatch(ctx, in, o...)
	c.t.Call(ctx, "DeleteMessageBatch", time.Since(start), err, -1)
	return out, err
}

func (c *tracedSQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	start := time.Now()
	out, err := c.SQSAPI.ChangeMessageVisibility(ctx, in, o...)
	c.t.Call(ctx, "ChangeMessageVisibility", time.Since(start), err, -1)
	return out, err
}

func (c *tracedSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	start := time.Now()
	out, err := c.SQSAPI.ChangeMessageVisibilityBatch(ctx, in, o...)
	c.t.Call(ctx, "ChangeMessageVisibilityBatch", time.Since(start), err, -1)
	return out, err
}

func (c *tracedSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	start := time.Now()
	out, err := c.SQSAPI.SendMessage(ctx, in, o...)
	c.t.Call(ctx, "SendMessage", time.Since(start), err, -1)
	return out, err
}

func (c *tracedSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	start := time.Now()
	out, err := c.SQSAPI.GetQueueAttributes(ctx, in, o...)
	c.t.Call(ctx, "GetQueueAttributes", time.Since(start), err, -1)
	return out, err
}
