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

// settleOp is one delete (visibility < 0) or visibility change.
type settleOp struct {
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
func (op settleOp) retried() bool { return op.tries > 0 }

// settler batches deletes and visibility changes: a batch is sent when it
// holds 10 entries or when the oldest entry has waited FlushInterval.
// Entries that fail in a batch are retried one by one, each call with its
// own timeout. A delete that still fails is logged, counted in the
// Observer, handed back to the heartbeat (when hold is set) and tried
// again later, until it succeeds, its handle is gone, or the settler
// closes.
type settler struct {
	client   SQSAPI
	queueURL string
	interval time.Duration
	parallel int
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

	// idle, when set, reports that no more ops are coming soon: a partial
	// batch is then sent at once instead of after interval. It is asked
	// when an op arrives and on nudge.
	idle func() bool
	// idleWake carries nudge's signal.
	idleWake chan struct{}
	// batchDone, when set, is called after each batch call, once every op
	// of the batch that was resolved had its done called.
	batchDone func()

	ops      chan settleOp
	done     chan struct{}
	batches  chan []settleOp // to the parallel senders
	wg       sync.WaitGroup  // the senders
	inflight sync.WaitGroup  // batches handed to the senders and not yet returned

	mu      sync.Mutex
	pending []pendingOp   // deletes to try again later
	wake    chan struct{} // signals a new pending op to run
}

type pendingOp struct {
	op  settleOp
	due time.Time
}

func newSettler(client SQSAPI, queueURL string, interval time.Duration, parallel int, log *zap.Logger) *settler {
	return &settler{
		client:      client,
		queueURL:    queueURL,
		interval:    interval,
		parallel:    parallel,
		log:         log,
		obs:         NopObserver{},
		callTimeout: settleCallTimeout,
		ops:         make(chan settleOp, 2*sqslimits.MaxBatchEntries),
		done:        make(chan struct{}),
		batches:     make(chan []settleOp),
		wake:        make(chan struct{}, 1),
		idleWake:    make(chan struct{}, 1),
	}
}

// nudge asks the settler to check idle again: called once idle may have
// turned true after the last op was queued.
func (s *settler) nudge() { wakeOne(s.idleWake) }

// delete queues a delete; done (when not nil) is called once it is
// resolved.
func (s *settler) delete(handle string, msg *Message, done func()) {
	s.ops <- settleOp{handle: handle, msg: msg, visibility: -1, done: done}
}

// changeVisibility queues a visibility change; done (when not nil) is
// called after it was sent.
func (s *settler) changeVisibility(handle string, msg *Message, secs int32, done func()) {
	s.ops <- settleOp{handle: handle, msg: msg, visibility: max(secs, 0), done: done}
}

// run batches ops until close is called, then flushes everything, makes a
// last attempt at every delete still pending, and waits for every call to
// return.
func (s *settler) run() {
	defer close(s.done)
	// Long-lived senders: a goroutine per call would grow a fresh stack
	// through the SDK's middleware on every batch.
	for range s.parallel {
		s.wg.Go(func() {
			for ops := range s.batches {
				s.call(ops)
				s.inflight.Done()
			}
		})
	}
	var dels, vis []settleOp
	var timer *time.Timer
	var timerC <-chan time.Time
	arm := func() {
		if timer == nil {
			timer = time.NewTimer(s.interval)
			timerC = timer.C
		}
	}
	disarm := func() {
		if timer != nil && len(dels) == 0 && len(vis) == 0 {
			timer.Stop()
			timer, timerC = nil, nil
		}
	}
	addDelete := func(op settleOp) {
		if dels == nil {
			dels = make([]settleOp, 0, sqslimits.MaxBatchEntries)
		}
		dels = append(dels, op)
		if len(dels) == sqslimits.MaxBatchEntries {
			s.send(dels)
			dels = nil
		}
	}
	// idle before len(s.ops): an op is queued before it stops counting
	// as unsettled, so once idle is true every op is in s.ops or taken.
	// The other order could find s.ops empty, then the last op queued and
	// idle true, and send a partial batch with that op alone after it.
	sendIfIdle := func() {
		if s.idle != nil && len(dels)+len(vis) > 0 && s.idle() && len(s.ops) == 0 {
			s.send(dels)
			s.send(vis)
			dels, vis = nil, nil
		}
	}
	var later *time.Timer
	defer func() {
		if later != nil {
			later.Stop()
		}
	}()
	var laterC <-chan time.Time
	for {
		select {
		case op, ok := <-s.ops:
			if !ok {
				if timer != nil {
					timer.Stop()
				}
				s.send(dels)
				s.send(vis)
				s.finish()
				close(s.batches)
				s.wg.Wait()
				return
			}
			if op.visibility < 0 {
				addDelete(op)
			} else {
				if vis == nil {
					vis = make([]settleOp, 0, sqslimits.MaxBatchEntries)
				}
				vis = append(vis, op)
				if len(vis) == sqslimits.MaxBatchEntries {
					s.send(vis)
					vis = nil
				}
			}
			sendIfIdle()
			arm()
			disarm()
		case <-timerC:
			timer, timerC = nil, nil
			s.send(dels)
			s.send(vis)
			dels, vis = nil, nil
		case <-s.idleWake:
			sendIfIdle()
			disarm()
		case <-s.wake:
		case <-laterC:
		}
		// Deletes due to be tried again join the next batch.
		due, next := s.due(time.Now())
		for _, op := range due {
			addDelete(op)
		}
		if len(due) > 0 {
			s.send(dels)
			dels = nil
			disarm()
		}
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
func (s *settler) due(now time.Time) (due []settleOp, next time.Time) {
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
func (s *settler) finish() {
	s.inflight.Wait()
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	var batch []settleOp
	for _, p := range pending {
		p.op.final = true
		batch = append(batch, p.op)
		if len(batch) == sqslimits.MaxBatchEntries {
			s.send(batch)
			batch = nil
		}
	}
	s.send(batch)
	s.inflight.Wait()
}

// close flushes and stops the settler; no op may be queued after it.
func (s *settler) close() {
	close(s.ops)
	<-s.done
}

// send hands ops (all deletes or all visibility changes) to one of the
// parallel senders, waiting for one to be free.
func (s *settler) send(ops []settleOp) {
	if len(ops) == 0 {
		return
	}
	s.inflight.Add(1)
	s.batches <- ops
}

// call makes one batch call for ops, then calls the done functions of
// those resolved.
func (s *settler) call(ops []settleOp) {
	if s.batchDone != nil {
		defer s.batchDone()
	}
	if ops[0].visibility < 0 && s.hold != nil && slices.ContainsFunc(ops, settleOp.retried) {
		// A delete tried again: take its handle back from the heartbeat.
		// A handle the heartbeat dropped meanwhile (its visibility ran
		// out) is gone: nothing is left to delete with it. (A batch of
		// first tries, the usual one, skips this and copies nothing.)
		live := make([]settleOp, 0, len(ops))
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
func (s *settler) resolved(ops ...settleOp) {
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

func (s *settler) deleteBatch(ops []settleOp) {
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
	var buf [sqslimits.MaxBatchEntries]settleOp
	deleted := buf[:0]
	for _, op := range ops {
		if !slices.ContainsFunc(retry, func(r settleOp) bool { return r.handle == op.handle }) {
			deleted = append(deleted, op)
		}
	}
	s.resolved(deleted...)
	for _, op := range retry {
		err := s.retry(op, "delete", func(ctx context.Context) error {
			_, err := s.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.queueURL), ReceiptHandle: aws.String(op.handle)})
			return err
		})
		if err == nil {
			s.resolved(op)
			continue
		}
		s.deleteFailed(op, err)
	}
}

// deleteFailed handles a delete that failed after its retries: it is
// logged and counted, and, unless this was the last attempt, its message
// is handed back to the heartbeat and the delete tried again later.
func (s *settler) deleteFailed(op settleOp, err error) {
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

func (s *settler) visibilityBatch(ops []settleOp) {
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
func (s *settler) failed(ops []settleOp, failed []types.BatchResultErrorEntry, err error, what string) []settleOp {
	if err != nil {
		s.log.Warn("consumer: "+what+" failed; retrying entries one by one", zap.Int("entries", len(ops)), zap.Error(err))
		return ops
	}
	var retry []settleOp
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
func (s *settler) retry(op settleOp, what string, call func(context.Context) error) error {
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
