package consumer

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/settle"
)

// hold settles m, received before its not-before time, as settle.Hold
// decides: its visibility set to the time left, or a fresh copy sent and
// m deleted. A copy that cannot be sent is held by its visibility instead.
// res is the pipeline's OutcomeHold; the Result returned says what was
// done.
func (r *runner) hold(m *inflight, res Result) Result {
	now := time.Now()
	act := settle.Hold(res.NotBefore, m.msg.ReceiveCount, r.q.maxReceives, r.cfg.HoldHop, m.recvStart(), now)
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
		act.Seconds = settle.HoldFallback(res.NotBefore, r.cfg.HoldHop, m.recvStart(), now)
		res.Err = err
		r.log.Warn("consumer: re-sending a held message failed; it is held by its visibility instead",
			zap.String("message_id", m.msg.ID), zap.Time("not_before", res.NotBefore),
			zap.Int32("visibility_seconds", act.Seconds), zap.Error(err))
	}
	res.Delay = time.Duration(act.Seconds) * time.Second
	r.settle(m, act.Seconds)
	return res
}
