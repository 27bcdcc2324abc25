package consumer

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/pipeline"
	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// instrument adds the OpenTelemetry instrumentation t (see
// Consumer.telemetry; the instruments are in internal/telemetry) to cfg:
// the per-message path's (a process span per message and the metrics fed
// by a wrapper of cfg.Observer, see pipeline.Instrument) and, when
// cfg.Client is set, every SQS call counted and timed. With a nil t
// (neither provider set) it returns cfg unchanged, so telemetry off costs
// nothing.
func instrument(cfg Config, t *telemetry.Consumer) Config {
	if t == nil {
		return cfg
	}
	if cfg.Client != nil {
		cfg.Client = &tracedSQS{SQSAPI: cfg.Client, t: t}
	}
	pcfg := pipeline.Instrument(cfg.processing(), t)
	cfg.Middleware, cfg.Observer = pcfg.Middleware, pcfg.Observer
	return cfg
}

// tracedSQS counts and times every SQS call, and traces ReceiveMessage.
type tracedSQS struct {
	SQSAPI
	t *telemetry.Consumer
}

// ReceiveMessage also traces the call: a receive span, made when the call
// brought messages or failed, that links to the trace context of each
// message returned (the messages' process spans are children of those
// contexts, not of the receive span).
func (c *tracedSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	start := time.Now()
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, o...)
	var msgs []types.Message
	if out != nil {
		msgs = out.Messages
	}
	c.t.Receive(ctx, aws.ToString(in.QueueUrl), start, msgs, err)
	c.t.Call(ctx, "ReceiveMessage", time.Since(start), err, len(msgs))
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
