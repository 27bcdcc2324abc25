package consumer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/pipeline"
)

// DrainEmptyReceives is how many receives in a row must come back empty,
// with no received message still unsettled, before [Consumer.Drain]
// considers the queue drained.
const DrainEmptyReceives = 2

// Drain runs the consumer like [Consumer.Run] until the queue is empty,
// then stops as Run does when its context is cancelled, and returns: for
// batch jobs and scripts that handle what is there and exit.
//
// The queue counts as empty once [DrainEmptyReceives] receives in a row
// (of any receiver; each a full long poll of WaitTime) returned no message
// while every message received so far was settled (acked, retried,
// dead-lettered or released). Messages that are not visible then (retried
// with a delay, or held by another consumer) are not waited for; a message
// a receive returns after that point is released, as in Run's drain.
//
// Drain returns nil when the queue was drained and every handler finished,
// what Run returns when that is an error (a start-up error, handlers
// cancelled at ShutdownTimeout, or receives that kept failing with an
// error retrying cannot heal for ReceiveErrorGrace), and ctx.Err() when
// ctx ended before the queue was empty. A Consumer runs (or drains) at most once at a time.
func (c *Consumer) Drain(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("consumer: Drain called while already running")
	}
	defer c.running.Store(false)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	w := &drainWatch{SQSAPI: c.cfg.Client, next: c.cfg.Observer, stop: stop}
	if w.next == nil {
		w.next = NopObserver{}
	}
	cfg := c.cfg
	cfg.Client, cfg.Observer = w, w
	d := &Consumer{cfg: cfg, health: c.health}
	err := d.Run(runCtx)
	if err != nil {
		return err
	}
	return ctx.Err()
}

// drainWatch sees every receive and settle of a Drain and stops it once
// the queue is empty.
type drainWatch struct {
	SQSAPI
	next Observer
	stop context.CancelFunc

	mu       sync.Mutex
	empties  int   // receives in a row that came back empty
	inflight int64 // received, not yet settled
}

func (w *drainWatch) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := w.SQSAPI.ReceiveMessage(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(out.Messages); n > 0 {
		w.empties = 0
		w.inflight += int64(n)
		return out, nil
	}
	w.empties++
	if w.empties >= DrainEmptyReceives && w.inflight == 0 {
		w.stop()
	}
	return out, nil
}

func (w *drainWatch) Received(msg *Message) { w.next.Received(msg) }

func (w *drainWatch) HandlerDone(msg *Message, d time.Duration, err error) {
	w.next.HandlerDone(msg, d, err)
}

func (w *drainWatch) Settled(msg *Message, res Result) {
	w.mu.Lock()
	w.inflight--
	w.mu.Unlock()
	w.next.Settled(msg, res)
}

func (w *drainWatch) HeartbeatFailed(n int, err error) { w.next.HeartbeatFailed(n, err) }

func (w *drainWatch) LeaseLost(msg *Message, err error) { w.next.LeaseLost(msg, err) }

func (w *drainWatch) DeadLettered(msg *Message, err error) { w.next.DeadLettered(msg, err) }

func (w *drainWatch) DeadLetterRefused(msg *Message, err error) {
	w.next.DeadLetterRefused(msg, err)
}

func (w *drainWatch) SettleFailed(msg *Message, op string, err error) {
	w.next.SettleFailed(msg, op, err)
}

func (w *drainWatch) Paused(p Pause) { pipeline.Paused(w.next, p) }

func (w *drainWatch) Resumed(d time.Duration) { pipeline.Resumed(w.next, d) }

func (w *drainWatch) ReceiveFailed(err error) { w.next.ReceiveFailed(err) }
