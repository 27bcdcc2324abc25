package redrive

import (
	"context"
	"errors"
	"time"

	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// PeekOptions shape a [Redriver.Peek].
type PeekOptions struct {
	// Max is how many matching messages to return. Defaults to 10.
	Max int
	// Filters select the messages shown (all must match).
	Filters []Filter
	// Progress, when not nil, is called after each receive.
	Progress func(Progress)
	// Census, when not nil, counts every message Peek receives, matching
	// or not: what the DLQ holds when the filters matched nothing.
	Census *Census
}

// Peek returns up to Max messages of a DLQ that pass the filters, and
// makes every message it received visible again before it returns. On a
// FIFO queue it sees only the first messages of each group that SQS hands
// out while the earlier ones are held.
func (r *Redriver) Peek(ctx context.Context, dlq Queue, opts PeekOptions) (entries []Entry, err error) {
	if opts.Max < 0 {
		return nil, errors.New("redrive: Max must not be negative")
	}
	limit := opts.Max
	if limit == 0 {
		limit = 10
	}
	p := newPass(r, dlq)
	defer p.finish(ctx)
	start := time.Now()
	received := 0
	err = p.run(ctx, func() int { return min(sqslimits.MaxBatchEntries, limit-len(entries)) }, func(ctx context.Context, msgs []*sqsmsg.Message) error {
		for _, m := range msgs {
			p.hold(m)
			received++
			e := r.entry(m)
			if opts.Census != nil {
				opts.Census.Add(e)
			}
			if len(entries) < limit && matchAll(opts.Filters, e) {
				entries = append(entries, e)
			}
		}
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: PhaseReceived, Total: limit, Received: received, Skipped: received - len(entries), Elapsed: time.Since(start)})
		}
		return nil
	})
	return entries, err
}
