package redrive

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// pass is one walk over a queue: it receives until the queue has nothing
// new, remembers every message it holds back (so that a message whose
// visibility ran out and came back is recognised, not handled twice), keeps
// held messages invisible while it runs, and makes them visible again at
// the end.
type pass struct {
	r *Redriver
	q Queue

	held      map[string]string // message id → latest receipt handle, released at the end
	order     []string          // held ids in the order first held
	undeleted map[string]bool   // handed on but not deleted: deleted when seen again
	deleted   map[string]bool

	lastExtend time.Time
	waitUntil  time.Time
	notes      []string
}

func newPass(r *Redriver, q Queue) *pass {
	return &pass{r: r, q: q, held: map[string]string{}, undeleted: map[string]bool{}, deleted: map[string]bool{}, lastExtend: time.Now()}
}

// run receives batches of next() messages (0 stops) and hands the new ones
// to handle, until the queue has nothing new.
func (p *pass) run(ctx context.Context, next func() int, handle func(context.Context, []*sqsmsg.Message) error) error {
	empties := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := next()
		if n <= 0 {
			return nil
		}
		p.extend(ctx)
		raw, err := p.r.receive(ctx, p.q, n)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("redrive: receive from %s: %w", p.q.Name, err)
		}
		fresh := p.triage(ctx, raw)
		if len(fresh) == 0 {
			if empties++; empties >= p.r.empties {
				if done, err := p.drained(ctx); err != nil || done {
					return err
				}
			}
			continue
		}
		empties = 0
		p.waitUntil = time.Time{}
		if err := handle(ctx, fresh); err != nil {
			return err
		}
	}
}

// triage returns the messages not seen before; seen ones have their handle
// refreshed (held) or are deleted again (handed on but not yet deleted).
func (p *pass) triage(ctx context.Context, raw []types.Message) []*sqsmsg.Message {
	now := p.r.now()
	var fresh []*sqsmsg.Message
	var redelete []*sqsmsg.Message
	for _, m := range raw {
		msg := delivery.New(m, p.q.URL, now)
		switch {
		case p.held[msg.ID] != "":
			p.held[msg.ID] = aws.ToString(m.ReceiptHandle)
		case p.undeleted[msg.ID] || p.deleted[msg.ID]:
			redelete = append(redelete, msg)
		default:
			fresh = append(fresh, msg)
		}
	}
	if len(redelete) > 0 {
		for _, m := range redelete {
			delete(p.undeleted, m.ID)
		}
		for _, m := range p.delete(ctx, redelete) {
			p.undeleted[m.ID] = true
		}
	}
	return fresh
}

// hold keeps a message back until the end of the pass.
func (p *pass) hold(m *sqsmsg.Message) {
	if _, ok := p.held[m.ID]; !ok {
		p.order = append(p.order, m.ID)
	}
	p.held[m.ID] = aws.ToString(m.Raw.ReceiptHandle)
}

// handles returns the held receipt handles, oldest first.
func (p *pass) handles() []string {
	out := make([]string, 0, len(p.held))
	for _, id := range p.order {
		if h := p.held[id]; h != "" {
			out = append(out, h)
		}
	}
	return out
}

// extend pushes back the visibility of held messages once a third of the
// visibility timeout has passed since the last extension.
func (p *pass) extend(ctx context.Context) {
	if len(p.held) == 0 || time.Since(p.lastExtend) < p.r.vis/3 {
		return
	}
	p.lastExtend = time.Now()
	p.r.setVisibility(ctx, p.q, p.handles(), int32(p.r.vis/time.Second))
}

// drained reports whether the queue has nothing left for this pass: SQS
// shows no more messages in flight than the pass holds itself. When it
// shows more (a receive whose response was lost, or another reader), it
// waits up to one visibility timeout for them to come back.
func (p *pass) drained(ctx context.Context) (bool, error) {
	out, err := p.r.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.q.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("redrive: queue attributes %s: %w", p.q.Name, err)
	}
	// A count that is not a number is unknown: the pass cannot tell that
	// nothing is in flight elsewhere, so it waits for such messages as if
	// the count said there were some, and says so at the end.
	raw := out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
	inFlight, known := approxCount(raw)
	own := len(p.held) + len(p.undeleted)
	if known && inFlight <= own {
		return true, nil
	}
	now := time.Now()
	if known {
		p.r.log.Debug("redrive: messages in flight elsewhere; waiting for them", zap.String("queue", p.q.Name), zap.Int("in_flight", inFlight), zap.Int("held", own))
	} else {
		p.r.log.Debug("redrive: in-flight count is not a number; waiting for messages in flight elsewhere", zap.String("queue", p.q.Name), zap.String("in_flight", clip(raw, 40)), zap.Int("held", own))
	}
	if p.waitUntil.IsZero() {
		p.waitUntil = now.Add(p.r.vis + 2*time.Second)
	}
	if !now.After(p.waitUntil) {
		return false, nil
	}
	if known {
		p.notes = append(p.notes, fmt.Sprintf("%d message(s) stayed in flight elsewhere (another reader?) and were not looked at", inFlight-own))
	} else {
		p.notes = append(p.notes, fmt.Sprintf("SQS returned ApproximateNumberOfMessagesNotVisible %s, which is not a number: the pass waited one visibility timeout for messages in flight elsewhere, then ended (any still in flight were not looked at)", clip(raw, 40)))
	}
	return true, nil
}

// delete deletes messages from the queue and returns those it could not
// delete (after one retry).
func (p *pass) delete(ctx context.Context, msgs []*sqsmsg.Message) (failed []*sqsmsg.Message) {
	all := msgs
	ctx = context.WithoutCancel(ctx)
	for attempt := 0; attempt < 2 && len(msgs) > 0; attempt++ {
		failed = nil
		for chunk := range chunks(msgs, sqslimits.MaxBatchEntries) {
			entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
			for i, m := range chunk {
				entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(batchID(i)), ReceiptHandle: m.Raw.ReceiptHandle}
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			out, err := p.r.client.DeleteMessageBatch(cctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.q.URL), Entries: entries}, sdkhttp.SQS)
			cancel()
			if err != nil {
				failed = append(failed, chunk...)
				continue
			}
			// A message is deleted when the response names it successful;
			// any other (failed, or missing from a malformed response) is
			// tried again.
			done := make([]bool, len(chunk))
			for _, s := range out.Successful {
				if i, ok := entryIndex(s.Id, len(chunk)); ok {
					done[i] = true
				}
			}
			for i, m := range chunk {
				if !done[i] {
					failed = append(failed, m)
				}
			}
		}
		msgs = failed
	}
	bad := map[string]bool{}
	for _, m := range failed {
		bad[m.ID] = true
	}
	for _, m := range all {
		if !bad[m.ID] {
			p.deleted[m.ID] = true
		}
	}
	for _, m := range failed {
		p.r.log.Warn("redrive: delete failed; the message will be handed on again (a duplicate)", zap.String("queue", p.q.Name), zap.String("message_id", m.ID))
	}
	return failed
}

// finish makes every held message visible again; it returns how many were
// released and how many could not be (they come back when their visibility
// timeout ends).
func (p *pass) finish(ctx context.Context) (released, failed int) {
	h := p.handles()
	failed = p.r.release(ctx, p.q, h)
	return len(h) - failed, failed
}
