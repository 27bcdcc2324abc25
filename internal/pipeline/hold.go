package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/internal/hold"
	"github.com/sqsonce/sqsonce/internal/msgstate"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// hold reports whether msg must not run yet, with its Result: OutcomeHold
// and its not-before time when it is early (the runtime then holds it as
// settle.Hold decides), a dead letter (class "permanent") when its
// not-before attribute does not parse or it is on a FIFO queue. A message
// that is due is made to look as first sent (unhold) and runs.
func (p *Processor) hold(ctx context.Context, msg *sqsmsg.Message) (sqsmsg.Result, bool) {
	v, ok := msg.Attributes[hold.Attr]
	if !ok {
		return sqsmsg.Result{}, false
	}
	mark, err := hold.Parse(aws.ToString(v.StringValue))
	if err != nil {
		return p.classify(ctx, msg, sqsmsg.Permanent(fmt.Errorf("consumer: %w", err))), true
	}
	if msg.GroupID != "" {
		return p.classify(ctx, msg, sqsmsg.Permanent(errors.New("consumer: the message has a not-before time ("+hold.Attr+") on a FIFO queue, which takes no per-message delay: holding it would block its group"))), true
	}
	if p.now().Before(mark.NotBefore) {
		return sqsmsg.Result{Outcome: sqsmsg.OutcomeHold, NotBefore: mark.NotBefore}, true
	}
	unhold(msg, mark)
	return sqsmsg.Result{}, false
}

// unhold makes a due message look to its handler as first sent: a
// re-sent copy takes the first copy's MessageId, SentTimestamp and
// not-before value (Raw keeps the copy's own), and a receive of this copy
// before the time (the one that held it) is not counted in its Attempt.
func unhold(msg *sqsmsg.Message, mark hold.Mark) {
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
		msgstate.SetUnrun(msg, msgstate.Unrun(msg)+1)
	}
}
