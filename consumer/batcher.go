package consumer

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/heartbeat"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// batchIDs are the entry ids of a batch call: its indexes.
var batchIDs = func() (ids [sqslimits.MaxBatchEntries]*string) {
	for i := range ids {
		ids[i] = aws.String(strconv.Itoa(i))
	}
	return ids
}()

// settleCallTimeout bounds each settle call: the batch call and every
// single-entry retry get their own. Settle calls outlive Run's context (a
// settle is never dropped on shutdown) but not this.
const settleCallTimeout = 20 * time.Second

// Delays before a delete that failed after its retries is tried again
// (while the heartbeat keeps its message invisible): doubling from the
// first to the last.
const (
	redeleteFirst = time.Second
	redeleteMax   = time.Minute
)

// batchOp is one delete (visibility < 0) or visibility change.
type batchOp struct {
	handle     string
	msg        *Message
	visibility int32  // seconds; -1 means delete
	done       func() // when not nil, called once the op is resolved: sent, or given up
	// tries counts the rounds a delete failed after its retries; 0 for a
	// new op.
	tries int
	// final marks the last round, at close: a failure is then given up.
	final bool
}

// retried reports whether op is a delete tried again after a failed round.
func (op batchOp) retried() bool { return op.tries > 0 }

// batcher makes the calls that carry out settles decided elsewhere (by
// internal/settle): it batches deletes and visibility changes. A batch is
// sent when it holds 10 entries or when the oldest entry has waited
// FlushInterval.
// Entries that fail in a batch are retried one by one, each call with its
// own timeout. A delete that still fails is logged, counted in the
// Observer, handed back to the heartbeat (when hold is set) and tried
// again later, until it succeeds, its handle is gone, or the batcher
// closes.
//
// An op joins its batch in the caller's goroutine, under one short lock:
// no goroutine is woken per message (BenchmarkSettle: 182 ns an op, where
// handing each op to a batcher goroutine took 531). The caller that fills
// a batch hands it to a sender (see slots), waiting while parallel calls
// are in flight; a timer sends a partial batch once its oldest op has
// waited the interval.
type batcher struct {
	client   SQSAPI
	queueURL string
	interval time.Duration
	log      *zap.Logger
	obs      Observer
	// hold, when set, keeps messages whose delete is unresolved invisible:
	// ops must then be queued with their handle suspended in it. A delete
	// tried again takes its handle back (Suspend, which reports whether
	// the heartbeat still tracks it); one that failed hands it back
	// (Resume); a resolved one is forgotten (Remove).
	hold *heartbeat.Heartbeat
	// callTimeout bounds each call. Defaults to settleCallTimeout.
	callTimeout time.Duration
	// objects, when set, deletes the S3 objects of acked messages marked
	// dropObject once their delete succeeded (PayloadConfig.DeleteAfterAck).
	objects payload.DeleteAPI

	// idle, when set, reports that no more ops are coming soon: the
	// partial batches are then sent at once instead of after interval. It
	// is asked when an op is queued and on nudge, and must not queue ops.
	idle func() bool
	// batchDone, when set, is called after each batch call, once every op
	// of the batch that was resolved had its done called.
	batchDone func()

	qmu    sync.Mutex
	dels   []batchOp   // the delete batch being filled
	vis    []batchOp   // the visibility batch being filled
	timer  *time.Timer // sends the partial batches; nil while both are empty
	armed  uint64      // counts the timers made: a stale one sends nothing
	closed bool        // by close: nothing is handed to the senders after it

	stop     chan struct{}  // closed by close: run returns
	done     chan struct{}  // closed when run returned
	inflight sync.WaitGroup // batches handed to the senders and not yet returned

	// The senders: each a goroutine with a channel of its own, started
	// when a batch finds none idle, at most one per slot. The idle ones
	// wait on a stack, and the last to finish takes the next batch: the
	// senders in use stay few, with their stacks grown for the SDK's
	// calls (a sender left idle over a GC cycle has its stack shrunk, and
	// grows it again on its next call), and the rest are never started.
	// (Calls made by the worker that fills a batch, without the handoff,
	// cost more on the bench's FIFO rows: any of the workers made them,
	// each growing its stack for the SDK's call after a GC shrank it,
	// about nine times the senders' runtime.newstack time; the handoff
	// readies the sender on the worker's own P.)
	slots chan struct{} // one per call in flight: cap is parallel
	smu   sync.Mutex
	idleS []chan []batchOp
	wg    sync.WaitGroup // the senders

	mu      sync.Mutex
	pending []pendingOp   // deletes to try again later
	wake    chan struct{} // signals a new pending op to run
}

type pendingOp struct {
	op  batchOp
	due time.Time
}

// newBatcher makes a batcher that makes up to parallel calls at once;
// run must run until close.
func newBatcher(client SQSAPI, queueURL string, interval time.Duration, parallel int, log *zap.Logger) *batcher {
	return &batcher{
		client:      client,
		queueURL:    queueURL,
		interval:    interval,
		log:         log,
		obs:         NopObserver{},
		callTimeout: settleCallTimeout,
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		wake:        make(chan struct{}, 1),
		slots:       make(chan struct{}, max(parallel, 1)),
	}
}

// delete queues a delete; done (when not nil) is called once it is
// resolved.
func (s *batcher) delete(handle string, msg *Message, done func()) {
	s.queue(batchOp{handle: handle, msg: msg, visibility: -1, done: done})
}

// changeVisibility queues a visibility change; done (when not nil) is
// called after it was sent.
func (s *batcher) changeVisibility(handle string, msg *Message, secs int32, done func()) {
	s.queue(batchOp{handle: handle, msg: msg, visibility: max(secs, 0), done: done})
}

// queue adds op to its batch, and sends the batch once it is full (or
// both partial ones, when idle says no more ops are coming soon).
func (s *batcher) queue(op batchOp) {
	var full []batchOp
	s.qmu.Lock()
	b := &s.vis
	if op.visibility < 0 {
		b = &s.dels
	}
	if *b == nil {
		*b = make([]batchOp, 0, sqslimits.MaxBatchEntries)
	}
	*b = append(*b, op)
	if len(*b) == sqslimits.MaxBatchEntries {
		full = s.take(b)
	}
	switch {
	case len(s.dels)+len(s.vis) == 0:
		s.disarm()
	case s.timer == nil:
		s.armed++
		armed := s.armed
		s.timer = time.AfterFunc(s.interval, func() { s.flush(armed) })
	}
	s.qmu.Unlock()
	s.send(full)
	s.nudge()
}

// nudge sends the partial batches at once when idle says no more ops are
// coming soon: called as an op is queued, and once idle may have turned
// true after the last op was.
func (s *batcher) nudge() {
	if s.idle != nil && s.idle() {
		s.flush(0)
	}
}

// flush sends both partial batches: those of the timer armed (the
// armed-th made), or, for 0, whatever is queued.
func (s *batcher) flush(armed uint64) {
	s.qmu.Lock()
	if armed != 0 && armed != s.armed {
		s.qmu.Unlock()
		return // a stale timer: its ops were sent already
	}
	dels, vis := s.take(&s.dels), s.take(&s.vis)
	s.disarm()
	s.qmu.Unlock()
	s.send(dels)
	s.send(vis)
}

// take empties the batch *b and returns it, counted in s.inflight, for
// send; nil when it is empty or the batcher is closed. s.qmu is held (so
// close, which waits for s.inflight, cannot miss a batch taken).
func (s *batcher) take(b *[]batchOp) []batchOp {
	ops := *b
	if len(ops) == 0 || s.closed {
		return nil
	}
	*b = nil
	s.inflight.Add(1)
	return ops
}

// disarm stops the timer once both batches are empty; s.qmu is held.
func (s *batcher) disarm() {
	if s.timer != nil && len(s.dels)+len(s.vis) == 0 {
		s.timer.Stop()
		s.timer = nil
	}
}

// run tries the deletes that failed again when they are due, until close
// is called.
func (s *batcher) run() {
	defer close(s.done)
	var later *time.Timer
	var laterC <-chan time.Time
	defer func() {
		if later != nil {
			later.Stop()
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-laterC:
		}
		due, next := s.due(time.Now())
		s.sendAll(due)
		if later != nil {
			later.Stop()
			later, laterC = nil, nil
		}
		if !next.IsZero() {
			later = time.NewTimer(time.Until(next))
			laterC = later.C
		}
	}
}

// due takes the pending deletes due at now and returns them with the time
// the next one is due (zero when none is pending).
func (s *batcher) due(now time.Time) (due []batchOp, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rest := s.pending[:0]
	for _, p := range s.pending {
		if !p.due.After(now) {
			due = append(due, p.op)
			continue
		}
		rest = append(rest, p)
		if next.IsZero() || p.due.Before(next) {
			next = p.due
		}
	}
	clear(s.pending[len(rest):])
	s.pending = rest
	return due, next
}

// finish runs at close, once every queued op was handed to a sender: it
// waits for the calls in flight, then makes one last attempt at every
// pending delete, now, and waits for those.
func (s *batcher) finish() {
	s.inflight.Wait()
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	ops := make([]batchOp, len(pending))
	for i, p := range pending {
		ops[i] = p.op
		ops[i].final = true
	}
	s.sendAll(ops)
	s.inflight.Wait()
}

// sendAll sends deletes outside the batches being filled (those tried
// again), ten to a call, each batch counted in s.inflight first; run does
// so before close, which waits for run, then finish.
func (s *batcher) sendAll(ops []batchOp) {
	for len(ops) > 0 {
		n := min(len(ops), sqslimits.MaxBatchEntries)
		s.inflight.Add(1)
		s.send(ops[:n:n])
		ops = ops[n:]
	}
}

// close sends what is queued, makes a last attempt at every delete
// still pending, waits for every call to return and stops the senders; no
// op may be queued after it.
func (s *batcher) close() {
	s.qmu.Lock()
	dels, vis := s.take(&s.dels), s.take(&s.vis)
	s.closed = true
	s.disarm() // both batches are empty now
	s.qmu.Unlock()
	s.send(dels)
	s.send(vis)
	close(s.stop)
	<-s.done
	s.finish()
	// Every sender is idle now: finish waited for the batches, and a
	// sender is back on the stack before its batch counts as returned.
	s.smu.Lock()
	for _, c := range s.idleS {
		close(c)
	}
	s.idleS = nil
	s.smu.Unlock()
	s.wg.Wait()
}

// send hands ops (all deletes or all visibility changes, counted in
// s.inflight) to the sender that finished last, or to a new one, waiting
// while parallel calls are in flight.
func (s *batcher) send(ops []batchOp) {
	if len(ops) == 0 {
		return
	}
	s.slots <- struct{}{}
	var c chan []batchOp
	s.smu.Lock()
	if n := len(s.idleS); n > 0 {
		c = s.idleS[n-1]
		s.idleS = s.idleS[:n-1]
	}
	s.smu.Unlock()
	if c == nil {
		c = make(chan []batchOp, 1)
		s.wg.Go(func() { s.sender(c) })
	}
	c <- ops
}

// sender makes the calls of the batches sent on c until c is closed.
func (s *batcher) sender(c chan []batchOp) {
	for ops := range c {
		s.call(ops)
		s.smu.Lock()
		s.idleS = append(s.idleS, c)
		s.smu.Unlock()
		<-s.slots
		s.inflight.Done()
	}
}

// call makes one batch call for ops, then calls the done functions of
// those resolved.
func (s *batcher) call(ops []batchOp) {
	if s.batchDone != nil {
		defer s.batchDone()
	}
	if ops[0].visibility < 0 && s.hold != nil && slices.ContainsFunc(ops, batchOp.retried) {
		// A delete tried again: take its handle back from the heartbeat.
		// A handle the heartbeat dropped meanwhile (its visibility ran
		// out) is gone: nothing is left to delete with it. (A batch of
		// first tries, the usual one, skips this and copies nothing.)
		live := make([]batchOp, 0, len(ops))
		for _, op := range ops {
			if op.retried() && !s.hold.Suspend(op.handle) {
				s.log.Warn("consumer: delete given up: the message's visibility ran out before it could be deleted",
					zap.String("message_id", op.msg.ID))
				s.resolved(op)
				continue
			}
			live = append(live, op)
		}
		if ops = live; len(ops) == 0 {
			return
		}
	}
	if ops[0].visibility < 0 {
		s.deleteBatch(ops)
	} else {
		s.visibilityBatch(ops)
		s.resolved(ops...)
	}
}

// resolved ends ops: the handles of deletes are forgotten, under one hold
// of the heartbeat's lock, then each op's done is called.
func (s *batcher) resolved(ops ...batchOp) {
	if s.hold != nil {
		var buf [sqslimits.MaxBatchEntries]string
		handles := buf[:0]
		for _, op := range ops {
			if op.visibility < 0 {
				handles = append(handles, op.handle)
			}
		}
		if len(handles) > 0 {
			s.hold.RemoveBatch(handles)
		}
	}
	for _, op := range ops {
		if op.done != nil {
			op.done()
		}
	}
}

func (s *batcher) deleteBatch(ops []batchOp) {
	in := &sqs.DeleteMessageBatchInput{QueueUrl: &s.queueURL, Entries: make([]types.DeleteMessageBatchRequestEntry, len(ops))}
	for i := range ops {
		in.Entries[i] = types.DeleteMessageBatchRequestEntry{Id: batchIDs[i], ReceiptHandle: &ops[i].handle}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout)
	out, err := s.client.DeleteMessageBatch(ctx, in)
	cancel()
	var failed []types.BatchResultErrorEntry
	if out != nil {
		failed = out.Failed
	}
	retry := s.failed(ops, failed, err, "delete batch")
	var buf [sqslimits.MaxBatchEntries]batchOp
	deleted := buf[:0]
	for _, op := range ops {
		if !slices.ContainsFunc(retry, func(r batchOp) bool { return r.handle == op.handle }) {
			deleted = append(deleted, op)
		}
	}
	s.resolved(deleted...)
	s.deleteObjects(deleted)
	for _, op := range retry {
		err := s.retry(op, "delete", func(ctx context.Context) error {
			_, err := s.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.queueURL), ReceiptHandle: aws.String(op.handle)})
			return err
		})
		if err == nil {
			s.resolved(op)
			s.deleteObjects([]batchOp{op})
			continue
		}
		s.deleteFailed(op, err)
	}
}

// deleteFailed handles a delete that failed after its retries: it is
// logged and counted, and, unless this was the last attempt, its message
// is handed back to the heartbeat and the delete tried again later.
func (s *batcher) deleteFailed(op batchOp, err error) {
	s.obs.SettleFailed(op.msg, "delete", err)
	if op.final || s.hold == nil || !s.hold.Resume(op.handle) {
		s.log.Error("consumer: delete failed; the message will be received again",
			zap.String("message_id", op.msg.ID), zap.Error(err))
		s.resolved(op)
		return
	}
	delay := min(redeleteFirst<<min(op.tries, 16), redeleteMax)
	op.tries++
	s.log.Error("consumer: delete failed; the message is kept invisible and its delete tried again",
		zap.String("message_id", op.msg.ID), zap.Int("round", op.tries), zap.Duration("retry_in", delay), zap.Error(err))
	s.mu.Lock()
	s.pending = append(s.pending, pendingOp{op: op, due: time.Now().Add(delay)})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *batcher) visibilityBatch(ops []batchOp) {
	in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &s.queueURL, Entries: make([]types.ChangeMessageVisibilityBatchRequestEntry, len(ops))}
	for i := range ops {
		in.Entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: batchIDs[i], ReceiptHandle: &ops[i].handle, VisibilityTimeout: ops[i].visibility}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout)
	out, err := s.client.ChangeMessageVisibilityBatch(ctx, in)
	cancel()
	var failed []types.BatchResultErrorEntry
	if out != nil {
		failed = out.Failed
	}
	for _, op := range s.failed(ops, failed, err, "change visibility batch") {
		err := s.retry(op, "change visibility", func(ctx context.Context) error {
			_, err := s.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(s.queueURL), ReceiptHandle: aws.String(op.handle), VisibilityTimeout: op.visibility,
			})
			return err
		})
		if err != nil {
			// The message keeps its current visibility: it comes back
			// later than asked, never lost.
			s.obs.SettleFailed(op.msg, "change visibility", err)
			s.log.Warn("consumer: change visibility failed; the message comes back when its visibility timeout ends",
				zap.String("message_id", op.msg.ID), zap.Int32("visibility_seconds", op.visibility), zap.Error(err))
		}
	}
}

// failed returns the ops to retry one by one: all of them when the call
// failed, else the failed entries.
func (s *batcher) failed(ops []batchOp, failed []types.BatchResultErrorEntry, err error, what string) []batchOp {
	if err != nil {
		s.log.Warn("consumer: "+what+" failed; retrying entries one by one", zap.Int("entries", len(ops)), zap.Error(err))
		return ops
	}
	var retry []batchOp
	for _, f := range failed {
		i, convErr := strconv.Atoi(aws.ToString(f.Id))
		if convErr != nil || i < 0 || i >= len(ops) {
			continue
		}
		retry = append(retry, ops[i])
	}
	return retry
}

// retry makes a single-entry call up to 3 times, each with its own
// timeout, stopping early when SQS says the handle can no longer be used
// (then the op is done: nil is returned). It returns the last error.
func (s *batcher) retry(op batchOp, what string, call func(context.Context) error) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout)
		err = call(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if handleGone(err) {
			s.log.Debug("consumer: "+what+": the receipt handle is no longer valid", zap.String("message_id", op.msg.ID), zap.Error(err))
			return nil
		}
	}
	return err
}

// handleGone reports whether err says the receipt handle cannot be used
// any more (the message was deleted, or received again elsewhere).
func handleGone(err error) bool {
	var invalid *types.ReceiptHandleIsInvalid
	var notInflight *types.MessageNotInflight
	if errors.As(err, &invalid) || errors.As(err, &notInflight) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ReceiptHandleIsInvalid", "AWS.SimpleQueueService.MessageNotInflight", "MessageNotInflight", "InvalidParameterValue":
			return true
		}
	}
	return false
}
