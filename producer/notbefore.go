package producer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
)

// AttrNotBefore is the message attribute that carries a message's
// not-before time ([Message.NotBefore]): RFC 3339 in UTC with
// milliseconds, followed on the copies a consumer re-sends by the hop
// count and the first copy's MessageId and SentTimestamp. It counts
// toward SQS's 10 attributes, and a message's own attributes may not use
// it.
const AttrNotBefore = hold.Attr

// ErrBeyondRetention is the error (matching [ErrInvalid]) of a message
// whose NotBefore is further off than the queue keeps a message (its
// MessageRetentionPeriod, less a minute for the message to be received at
// its time): SQS would delete it before it is due.
var ErrBeyondRetention = errors.New("producer: NotBefore is beyond the queue's MessageRetentionPeriod")

// receiveMargin is kept off the queue's retention for a not-before
// message: at its time a consumer still has to receive it.
const receiveMargin = time.Minute

// notBefore turns m's NotBefore into what is sent: a message due more
// than a second from now carries [AttrNotBefore] and is delayed by the
// time left (at most 15 minutes, or Config.DelayHop), so that SQS holds
// it as long as it can and a consumer holds it the rest of the way; one
// already due is sent as a plain message. The error matches ErrInvalid.
func (p *Producer) notBefore(ctx context.Context, m Message, now time.Time) (Message, error) {
	if m.NotBefore.IsZero() {
		return m, nil
	}
	if p.fifo {
		return m, invalidError{errors.New("producer: NotBefore is not supported on FIFO queues: SQS takes no per-message delay there, and a message held until its time would block its group")}
	}
	if m.Delay != 0 {
		return m, invalidError{errors.New("producer: set Delay or NotBefore, not both")}
	}
	left := m.NotBefore.Sub(now)
	if left <= 0 {
		m.NotBefore = time.Time{}
		return m, nil
	}
	keep, err := p.Retention(ctx)
	if err != nil {
		return m, err
	}
	if left > keep-receiveMargin {
		return m, invalidError{fmt.Errorf("%w: it is %s away, and the queue keeps a message %s (a minute of it is left for the receive): raise the queue's MessageRetentionPeriod (up to 14 days) or send the message later",
			ErrBeyondRetention, left.Round(time.Second), keep)}
	}
	m.Attributes = withAttr(m.Attributes, AttrNotBefore, types.MessageAttributeValue{
		DataType: aws.String("String"), StringValue: aws.String(hold.Mark{NotBefore: m.NotBefore}.Value()),
	})
	hop := min(p.cfg.DelayHop, 15*time.Minute)
	if hop <= 0 {
		hop = 15 * time.Minute
	}
	m.Delay = min((left+time.Second-1)/time.Second*time.Second, hop)
	return m, nil
}

// Retention returns how long the queue keeps a message: its
// MessageRetentionPeriod, read with GetQueueAttributes on the first call
// that needs it (the first message with a NotBefore; the same call that
// reads the MaximumMessageSize when that is read too) and kept. An error
// is not kept: the next call tries again.
func (p *Producer) Retention(ctx context.Context) (time.Duration, error) {
	p.limitMu.Lock()
	defer p.limitMu.Unlock()
	if p.retention > 0 {
		return p.retention, nil
	}
	out, err := p.cfg.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.cfg.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMessageRetentionPeriod},
	}, sdkhttp.SQS)
	if err != nil {
		return 0, fmt.Errorf("producer: read the queue's MessageRetentionPeriod for a NotBefore (allow sqs:GetQueueAttributes): %w", err)
	}
	if err := p.keepRetention(out.Attributes); err != nil {
		return 0, err
	}
	return p.retention, nil
}

// keepRetention keeps the MessageRetentionPeriod of attrs (limitMu held).
func (p *Producer) keepRetention(attrs map[string]string) error {
	raw := attrs[string(types.QueueAttributeNameMessageRetentionPeriod)]
	secs, err := strconv.Atoi(raw)
	if err != nil || secs <= 0 {
		return fmt.Errorf("producer: the queue's MessageRetentionPeriod is %q, not a number of seconds", raw)
	}
	p.retention = time.Duration(secs) * time.Second
	return nil
}
