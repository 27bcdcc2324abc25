package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// pollWatch is the receivers' SQS client: it remembers until when a
// receive call that its context cut short may still be polling on the
// server. SQS does not end a long poll when the client goes away: until
// its WaitTimeSeconds are over it takes whatever becomes visible, into a
// response nobody reads, and those messages wait out their visibility
// timeout. The drain releases the messages it received but did not start
// only after that (see runner.awaitPolls), so that none of them is taken
// that way.
type pollWatch struct {
	SQSAPI

	mu    sync.Mutex
	quiet time.Time // when the last cut poll has surely ended on the server
}

// pollMargin covers the time between a receive call's start and its
// arrival at SQS, where the long poll's wait starts.
const pollMargin = time.Second

func (p *pollWatch) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	start := time.Now()
	out, err := p.SQSAPI.ReceiveMessage(ctx, in, optFns...)
	if err != nil && ctx.Err() != nil {
		end := start.Add(time.Duration(in.WaitTimeSeconds)*time.Second + pollMargin)
		p.mu.Lock()
		if end.After(p.quiet) {
			p.quiet = end
		}
		p.mu.Unlock()
	}
	return out, err
}

// quietAt returns when every receive call cut short so far has ended on
// the server (zero: none was cut).
func (p *pollWatch) quietAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.quiet
}

// awaitPolls waits, during the drain, until a message received but not
// started can be released: once the receivers have returned, and once
// every receive call they cut short has ended on the server (see
// pollWatch), but not past the drain's ShutdownTimeout (and pollMargin).
// With a WaitTime longer than ShutdownTimeout, a cut poll can still take
// a message released then.
func (r *runner) awaitPolls() {
	<-r.recvDone
	until := r.polls.quietAt()
	if last := r.drainDeadline.Add(pollMargin); until.After(last) {
		until = last
	}
	if d := time.Until(until); d > 0 {
		time.Sleep(d)
	}
}

// releaseUnstarted releases, during the drain, a message that was
// received but not started (see awaitPolls).
func (r *runner) releaseUnstarted(m *inflight) {
	r.awaitPolls()
	r.release(m, nil)
}
