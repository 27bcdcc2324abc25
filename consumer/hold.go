package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/settle"
)

// AttrNotBefore is the message attribute that carries a message's
// not-before time (producer.Message.NotBefore; see "Delays beyond 15
// minutes" in docs/large-messages.md). A message received before that
// time is not run but held ([OutcomeHold]): its visibility is set to the
// time left, at most once per copy, or a fresh copy is sent delayed by
// up to 15 minutes and this one deleted. It runs once received at or
// after its time, its handler seeing it as first sent: the body and
// attributes as sent, [Message.ID] and [Message.SentAt] the first copy's.
const AttrNotBefore = hold.Attr

// hold reports whether msg must not run yet, with its Result: OutcomeHold
// and its not-before time when it is early, a dead letter (class
// "permanent") when its not-before attribute does not parse or it is on
// a FIFO queue. A message that is due is made to look as first sent
// (unhold) and runs.
func (p *processor) hold(ctx context.Context, msg *Message) (Result, bool) {
	v, ok := msg.Attributes[hold.Attr]
	if !ok {
		return Result{}, false
	}
	mark, err := hold.Parse(aws.ToString(v.StringValue))
	if err != nil {
		return p.classify(ctx, msg, Permanent(fmt.Errorf("consumer: %w", err))), true
	}
	if msg.GroupID != "" {
		return p.classify(ctx, msg, Permanent(errors.New("consumer: the message has a not-before time ("+hold.Attr+") on a FIFO queue, which takes no per-message delay: holding it would block its group"))), true
	}
	if p.now().Before(mark.NotBefore) {
		return Result{Outcome: OutcomeHold, NotBefore: mark.NotBefore}, true
	}
	unhold(msg, mark)
	return Result{}, false
}

// unhold makes a due message look to its handler as first sent: a
// re-sent copy takes the first copy's MessageId, SentTimestamp and
// not-before value (Raw keeps the copy's own), and a receive of this copy
// before the time (the one that held it) is not counted in its Attempt.
func unhold(msg *Message, mark hold.Mark) {
	if mark.MessageID != "" {
		msg.ID = mark.MessageID
		if !mark.SentAt.IsZero() {
			msg.SentAt = mark.SentAt
		}
		attrs := maps.Clone(msg.Attributes)
		attrs[hold.Attr] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(hold.Mark{NotBefore: mark.NotBefore}.Value())}
		msg.Attributes = attrs
	}
	ms, err := strconv.ParseInt(msg.SystemAttributes[string(types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp)], 10, 64)
	if err == nil && msg.ReceiveCount > 1 && time.UnixMilli(ms).Before(mark.NotBefore) {
		msg.unrun++
	}
}

// hold settles m, received before its not-before time, as settle.Hold
// decides: its visibility set to the time left, or a fresh copy sent and
// m deleted. A copy that cannot be sent is held by its visibility instead.
// res is the pipeline's OutcomeHold; the Result returned says what was
// done.
func (r *runner) hold(m *inflight, res Result) Result {
	now := time.Now()
	act := settle.Hold(res.NotBefore, m.msg.ReceiveCount, r.q.maxReceives, r.cfg.HoldHop, m.recvStart, now)
	if act.Resend {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.workBase), settleCallTimeout)
		err := settle.Resend(ctx, r.cfg.Client, settle.Copy{
			QueueURL: r.q.url, Body: aws.ToString(m.msg.Raw.Body), Attributes: m.msg.Raw.MessageAttributes,
			MessageID: aws.ToString(m.msg.Raw.MessageId), SentAt: m.msg.SentAt, Delay: act.Seconds,
		})
		cancel()
		if err == nil {
			res.Resent, res.Delay = true, time.Duration(act.Seconds)*time.Second
			r.settle(m, -1)
			return res
		}
		act.Seconds = settle.HoldFallback(res.NotBefore, r.cfg.HoldHop, m.recvStart, now)
		res.Err = err
		r.log.Warn("consumer: re-sending a held message failed; it is held by its visibility instead",
			zap.String("message_id", m.msg.ID), zap.Time("not_before", res.NotBefore),
			zap.Int32("visibility_seconds", act.Seconds), zap.Error(err))
	}
	res.Delay = time.Duration(act.Seconds) * time.Second
	r.settle(m, act.Seconds)
	return res
}
