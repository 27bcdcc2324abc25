package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/backoff"
)

// The batching, FIFO ordering and retries below are shared by the SQS
// Producer and the SNS Publisher: a rule about how a batch is cut, how a
// group keeps its order or when a message is tried again is written once.

// call is one SendBatch or PublishBatch call's messages, by index, as the
// shared logic sees them.
type call interface {
	// group returns the message's FIFO group.
	group(idx int) string
	// size returns the message's size as the service counts it.
	size(idx int) int
	// sendOnce makes one service call for batch (in order), settles each
	// of its messages' Result, and returns those worth another attempt.
	sendOnce(ctx context.Context, batch []int) []int
}

// sender sends a call's messages in batches, with retries.
type sender struct {
	fifo                    bool
	maxAttempts             int
	backoffBase, backoffMax time.Duration
	concurrency             int
	// callBytes is the most bytes the messages of one call may add up to.
	callBytes int
}

// send sends the pending messages of c (those not refused before
// sending, whose Result has no error yet).
func (s sender) send(ctx context.Context, c call, results []Result, pending []int) {
	if s.fifo {
		s.sendFIFO(ctx, c, results, pending)
		return
	}
	// Up to concurrency workers take the batches in order, so that at
	// most concurrency calls run at once.
	batches := s.split(c, pending)
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(batches) {
				return
			}
			s.sendWithRetries(ctx, c, results, batches[i])
		}
	}
	var wg sync.WaitGroup
	for range min(s.concurrency, len(batches)) {
		wg.Go(work)
	}
	wg.Wait()
}

// sendFIFO sends batch after batch; a group whose message failed is
// blocked for the rest of the call.
func (s sender) sendFIFO(ctx context.Context, c call, results []Result, pending []int) {
	blocked := map[string]error{}
	// A message refused before sending blocks its group's later ones.
	refused := map[string]int{} // group → index of its first refused message
	for i := len(results) - 1; i >= 0; i-- {
		if results[i].Err != nil {
			refused[c.group(i)] = i
		}
	}
	for len(pending) > 0 {
		var live []int
		for _, idx := range pending {
			g := c.group(idx)
			if first, ok := refused[g]; ok && first < idx {
				blocked[g] = results[first].Err
			}
			// The cause as text: the blocked message itself is not at
			// fault (it must not match ErrInvalid).
			if err, ok := blocked[g]; ok {
				results[idx].Err = fmt.Errorf("%w: %v", ErrGroupBlocked, err)
				continue
			}
			live = append(live, idx)
		}
		if len(live) == 0 {
			return
		}
		// One message per group per call: SQS and SNS settle each entry
		// of a batch on its own, so a group's later entry could be stored
		// while an earlier one of the same call was refused.
		var next, rest []int
		inCall := map[string]bool{}
		for _, idx := range live {
			if g := c.group(idx); !inCall[g] && len(next) < MaxBatchEntries {
				inCall[g] = true
				next = append(next, idx)
				continue
			}
			rest = append(rest, idx)
		}
		batch := s.split(c, next)[0]
		rest = append(next[len(batch):], rest...)
		slices.SortFunc(rest, cmp.Compare)
		s.sendWithRetries(ctx, c, results, batch)
		for _, idx := range batch {
			if err := results[idx].Err; err != nil {
				if _, ok := blocked[c.group(idx)]; !ok {
					blocked[c.group(idx)] = err
				}
			}
		}
		pending = rest
	}
}

// split groups idxs into batches of at most 10 entries and callBytes, in
// order.
func (s sender) split(c call, idxs []int) [][]int {
	if len(idxs) == 0 {
		return nil
	}
	batches := make([][]int, 0, (len(idxs)+MaxBatchEntries-1)/MaxBatchEntries)
	cur := make([]int, 0, min(MaxBatchEntries, len(idxs)))
	size := 0
	for k, idx := range idxs {
		n := c.size(idx)
		if len(cur) == MaxBatchEntries || (len(cur) > 0 && size+n > s.callBytes) {
			batches = append(batches, cur)
			cur, size = make([]int, 0, min(MaxBatchEntries, len(idxs)-k)), 0
		}
		cur = append(cur, idx)
		size += n
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	return batches
}

// sendWithRetries sends one batch, then its retriable failures again with
// backoff, until each message is settled in results.
func (s sender) sendWithRetries(ctx context.Context, c call, results []Result, batch []int) {
	for attempt := 1; len(batch) > 0; attempt++ {
		retry := c.sendOnce(ctx, batch)
		if len(retry) == 0 {
			return
		}
		if attempt >= s.maxAttempts || ctx.Err() != nil {
			return
		}
		t := time.NewTimer(backoff.FullJitter(s.backoffBase, s.backoffMax, attempt, nil))
		select {
		case <-ctx.Done():
			t.Stop()
			for _, idx := range retry {
				results[idx].Err = fmt.Errorf("producer: send: %w (last failure: %w)", ctx.Err(), results[idx].Err)
			}
			return
		case <-t.C:
		}
		batch = retry
	}
}

// attrSize is one attribute's size as SQS and SNS count it against the
// message size: its name, data type and value.
func attrSize(name, dataType, str string, bin []byte) int {
	return len(name) + len(dataType) + len(str) + len(bin)
}

// callFailed settles a batch call that failed as a whole and returns the
// entries worth another attempt. refused says the error is the service's
// refusal of what a message of the call holds (a body, an attribute, a
// size): a message alone in its call is then invalid, and the messages of
// a larger call are sent again one by one, to find which.
func callFailed(ctx context.Context, c call, results []Result, batch []int, err error, refused bool, service string, log *zap.Logger) []int {
	if ctx.Err() == nil && refused {
		if len(batch) == 1 {
			results[batch[0]].Err = invalidError{fmt.Errorf("producer: send: %s refused the message: %w", service, err)}
			log.Warn("producer: message refused", zap.String("sqsonce_id", results[batch[0]].ID), zap.Error(err))
			return nil
		}
		var retry []int
		for _, idx := range batch {
			retry = append(retry, c.sendOnce(ctx, []int{idx})...)
		}
		return retry
	}
	err = fmt.Errorf("producer: send batch: %w", err)
	for _, idx := range batch {
		results[idx].Err = err
	}
	if ctx.Err() != nil {
		return nil
	}
	log.Warn("producer: send batch failed", zap.Int("entries", len(batch)), zap.Error(err))
	return batch
}

// entryOK is a batch call's success for one entry, whatever the service.
type entryOK struct{ id, messageID, sequenceNumber string }

// settle records a batch call's answer (the entries' ids are their
// positions in batch) in results, and returns the entries worth another
// attempt: those that failed not as the sender's fault, and those the
// service did not answer for. failed[i] is the failure of the entry
// failedIDs[i].
func settle(results []Result, batch []int, oks []entryOK, failedIDs []string, failed []EntryError, service string, log *zap.Logger) []int {
	var retry []int
	settled := make([]bool, len(batch))
	for _, ok := range oks {
		i, err := strconv.Atoi(ok.id)
		if err != nil || i < 0 || i >= len(batch) {
			continue
		}
		settled[i] = true
		r := &results[batch[i]]
		r.Err, r.MessageID, r.SequenceNumber = nil, ok.messageID, ok.sequenceNumber
	}
	for k, f := range failed {
		i, err := strconv.Atoi(failedIDs[k])
		if err != nil || i < 0 || i >= len(batch) || settled[i] {
			continue
		}
		settled[i] = true
		idx := batch[i]
		f.Service = service
		results[idx].Err = &f
		log.Warn("producer: message refused", zap.String("sqsonce_id", results[idx].ID),
			zap.String("code", f.Code), zap.Bool("sender_fault", f.SenderFault))
		if !f.SenderFault {
			retry = append(retry, idx)
		}
	}
	for i, ok := range settled {
		if !ok { // the service answered for neither: try again
			results[batch[i]].Err = errors.New("producer: " + service + " returned no result for the entry")
			retry = append(retry, batch[i])
		}
	}
	return retry
}
