package consumer

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.uber.org/zap"
)

// settleBatch is SQS's limit on entries per batch call.
const settleBatch = 10

// batchIDs are the entry ids of a batch call: its indexes.
var batchIDs = func() (ids [settleBatch]*string) {
	for i := range ids {
		ids[i] = aws.String(strconv.Itoa(i))
	}
	return ids
}()

// settleCallTimeout bounds each settle call. Settle calls outlive Run's
// context (a settle is never dropped on shutdown) but not this.
const settleCallTimeout = 20 * time.Second

// settleOp is one delete (visibility < 0) or visibility change.
type settleOp struct {
	handle     string
	messageID  string
	visibility int32  // seconds; -1 means delete
	done       func() // when not nil, called once the op's call (and retries) returned
}

// settler batches deletes and visibility changes: a batch is sent when it
// holds 10 entries or when the oldest entry has waited FlushInterval.
// Entries that fail in a batch are retried one by one.
type settler struct {
	client   SQSAPI
	queueURL string
	interval time.Duration
	parallel int
	log      *zap.Logger

	// idle, when set, reports that no more ops are coming soon: a partial
	// batch is then sent at once instead of after interval.
	idle func() bool

	ops     chan settleOp
	done    chan struct{}
	batches chan []settleOp // to the parallel senders
	wg      sync.WaitGroup  // the senders
}

func newSettler(client SQSAPI, queueURL string, interval time.Duration, parallel int, log *zap.Logger) *settler {
	return &settler{
		client:   client,
		queueURL: queueURL,
		interval: interval,
		parallel: parallel,
		log:      log,
		ops:      make(chan settleOp, 2*settleBatch),
		done:     make(chan struct{}),
		batches:  make(chan []settleOp),
	}
}

// delete queues a delete; done (when not nil) is called after it was sent.
func (s *settler) delete(handle, messageID string, done func()) {
	s.ops <- settleOp{handle: handle, messageID: messageID, visibility: -1, done: done}
}

// changeVisibility queues a visibility change; done (when not nil) is
// called after it was sent.
func (s *settler) changeVisibility(handle, messageID string, secs int32, done func()) {
	s.ops <- settleOp{handle: handle, messageID: messageID, visibility: max(secs, 0), done: done}
}

// run batches ops until close is called, then flushes everything and waits
// for every call to return.
func (s *settler) run() {
	defer close(s.done)
	// Long-lived senders: a goroutine per call would grow a fresh stack
	// through the SDK's middleware on every batch.
	for range s.parallel {
		s.wg.Go(func() {
			for ops := range s.batches {
				s.call(ops)
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
	for {
		select {
		case op, ok := <-s.ops:
			if !ok {
				if timer != nil {
					timer.Stop()
				}
				s.send(dels)
				s.send(vis)
				close(s.batches)
				s.wg.Wait()
				return
			}
			if op.visibility < 0 {
				if dels == nil {
					dels = make([]settleOp, 0, settleBatch)
				}
				dels = append(dels, op)
				if len(dels) == settleBatch {
					s.send(dels)
					dels = nil
				}
			} else {
				if vis == nil {
					vis = make([]settleOp, 0, settleBatch)
				}
				vis = append(vis, op)
				if len(vis) == settleBatch {
					s.send(vis)
					vis = nil
				}
			}
			if s.idle != nil && len(s.ops) == 0 && s.idle() {
				s.send(dels)
				s.send(vis)
				dels, vis = nil, nil
			}
			arm()
			disarm()
		case <-timerC:
			timer, timerC = nil, nil
			s.send(dels)
			s.send(vis)
			dels, vis = nil, nil
		}
	}
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
	s.batches <- ops
}

// call makes one batch call for ops, then calls their done functions.
func (s *settler) call(ops []settleOp) {
	ctx, cancel := context.WithTimeout(context.Background(), settleCallTimeout)
	defer cancel()
	if ops[0].visibility < 0 {
		s.deleteBatch(ctx, ops)
	} else {
		s.visibilityBatch(ctx, ops)
	}
	for _, op := range ops {
		if op.done != nil {
			op.done()
		}
	}
}

func (s *settler) deleteBatch(ctx context.Context, ops []settleOp) {
	in := &sqs.DeleteMessageBatchInput{QueueUrl: &s.queueURL, Entries: make([]types.DeleteMessageBatchRequestEntry, len(ops))}
	for i := range ops {
		in.Entries[i] = types.DeleteMessageBatchRequestEntry{Id: batchIDs[i], ReceiptHandle: &ops[i].handle}
	}
	out, err := s.client.DeleteMessageBatch(ctx, in)
	var failed []types.BatchResultErrorEntry
	if out != nil {
		failed = out.Failed
	}
	for _, op := range s.failed(ops, failed, err, "delete batch") {
		s.retry(ctx, op, "delete", func(ctx context.Context) error {
			_, err := s.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.queueURL), ReceiptHandle: aws.String(op.handle)})
			return err
		})
	}
}

func (s *settler) visibilityBatch(ctx context.Context, ops []settleOp) {
	in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &s.queueURL, Entries: make([]types.ChangeMessageVisibilityBatchRequestEntry, len(ops))}
	for i := range ops {
		in.Entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: batchIDs[i], ReceiptHandle: &ops[i].handle, VisibilityTimeout: ops[i].visibility}
	}
	out, err := s.client.ChangeMessageVisibilityBatch(ctx, in)
	var failed []types.BatchResultErrorEntry
	if out != nil {
		failed = out.Failed
	}
	for _, op := range s.failed(ops, failed, err, "change visibility batch") {
		s.retry(ctx, op, "change visibility", func(ctx context.Context) error {
			_, err := s.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(s.queueURL), ReceiptHandle: aws.String(op.handle), VisibilityTimeout: op.visibility,
			})
			return err
		})
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

// retry makes a single-entry call up to 3 times, stopping early when SQS
// says the handle can no longer be used.
func (s *settler) retry(ctx context.Context, op settleOp, what string, call func(context.Context) error) {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		if err = call(ctx); err == nil || handleGone(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		s.log.Warn("consumer: "+what+" failed", zap.String("message_id", op.messageID), zap.Error(err))
	}
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
