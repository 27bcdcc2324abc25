package redrive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/printable"
	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/settle"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// AttrRedrive is the redrive history a moved message carries instead of
// its sqsonce-failure attribute (a JSON [History]), so that the consumer
// starts fresh while the last failure stays readable. It is left out when
// the message already has SQS's maximum of 10 attributes.
const AttrRedrive = "sqsonce-redrive"

// maxBatchBytes is the payload a move or an import puts in one
// SendMessageBatch, counted as SQS counts it (sqslimits.MessageSize): a
// quarter of SQS's limit (sqslimits.MaxMessageBytes), the limit SQS had
// before 2025, which some emulators still enforce. A single larger message
// still goes alone in its batch.
const maxBatchBytes = sqslimits.MaxMessageBytes / 4

// History is the JSON of the [AttrRedrive] attribute.
type History struct {
	// Count is how many times the message was redriven.
	Count int `json:"count"`
	// RedrivenAt is when it was last redriven.
	RedrivenAt time.Time `json:"redriven_at"`
	// DLQ is the name of the queue it was last moved out of.
	DLQ string `json:"dlq"`
	// LastFailure is its sqsonce-failure attribute at that time, if any.
	LastFailure *deadletter.Failure `json:"last_failure,omitempty"`
	// Run is the random id of the move that wrote this history: a message
	// that comes back to the DLQ during that same move is left there (see
	// [Redriver.Move]). Only the run's own id counts, so a history written
	// by anyone else (a producer can forge the attribute) never holds a
	// message back.
	Run string `json:"run,omitempty"`
}

// ParseHistory parses an [AttrRedrive] attribute value. The value is
// outside input (a producer can set any attribute): an error is returned
// for anything but a JSON object of the History shape.
func ParseHistory(s string) (History, error) {
	var h History
	if len(s) > maxHistoryBytes {
		return History{}, fmt.Errorf("redrive: redrive history: %d bytes, over %d", len(s), maxHistoryBytes)
	}
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return History{}, fmt.Errorf("redrive: redrive history: %w", err)
	}
	return h, nil
}

// maxHistoryBytes bounds the redrive history read from a message; SQS's
// own limit on the whole message is far larger.
const maxHistoryBytes = 64 << 10

// Phase names the step a [Progress] report follows.
type Phase string

// Phases.
const (
	PhaseReceived Phase = "received" // a batch was received and sorted
	PhaseSent     Phase = "sent"     // a batch was sent (or written), not yet deleted
	PhaseDeleted  Phase = "deleted"  // the sent messages were deleted from the DLQ
)

// Progress reports a running move, export or import.
type Progress struct {
	Phase Phase
	// Total is the queue's approximate message count at the start (the
	// record count for an import), or Max when that is smaller; 0 unknown.
	Total    int
	Received int
	Moved    int
	Skipped  int
	Failed   int
	Elapsed  time.Duration
}

// MoveOptions shape a [Redriver.Move].
type MoveOptions struct {
	// To is the destination queue (name, URL or ARN). Empty: each message
	// goes back to the queue it came from, taken only from what a producer
	// that may send to the source queue or to the DLQ cannot forge, and
	// only if that queue is a source of the DLQ (its RedrivePolicy names
	// the DLQ) in the DLQ's account and region: SQS's
	// DeadLetterQueueSourceArn (stamped on SQS's own maxReceiveCount
	// moves) wins over anything the message carries; else the
	// source_queue of a failure record signed with Config.SigningKey;
	// else, on a DLQ with a single source, that source (a failure record
	// naming another queue is refused). Any other message is refused: left
	// in the DLQ and counted in Summary.Refused, with a note that says to
	// name a destination. A DLQ that no queue names in its RedrivePolicy
	// needs To (an error wrapping ErrNoDestination).
	To string
	// Filters select the messages to move (all must match). Others stay in
	// the DLQ. On a FIFO DLQ a message that does not match blocks the rest
	// of its group: moving later messages of the group first would reorder
	// it, so they stay too (counted in Summary.Blocked).
	Filters []Filter
	// Max moves at most this many messages; 0 means all.
	Max int
	// Rate caps the move at this many messages per second; 0 means no cap.
	Rate float64
	// DryRun looks at the messages, counts what would move where, and
	// changes nothing (everything it received is visible again at the end).
	DryRun bool
	// Progress, when not nil, is called after each step.
	Progress func(Progress)
}

// Summary is the outcome of a move, export or import.
type Summary struct {
	// DryRun reports a dry run: nothing was changed.
	DryRun bool `json:"dry_run"`
	// Received counts distinct messages looked at (records read, for an
	// import): Moved + Skipped + Refused + Failed in a move, Matched +
	// Skipped + Refused in a dry run. A copy of a message this run moved
	// that came back to the DLQ is the same dead letter: it is counted in
	// CameBack only.
	Received int `json:"received"`
	// Matched counts messages that passed the filters (and were to move,
	// within Max): in a dry run, the messages that would move.
	Matched int `json:"matched"`
	// Moved counts messages sent (written, for an export) and, for a move,
	// deleted from the DLQ or marked DeleteFailed.
	Moved int `json:"moved"`
	// Skipped counts messages left in the DLQ on purpose: not matching a
	// filter, blocked behind such a message in a FIFO group, or past Max.
	Skipped int `json:"skipped"`
	// Blocked is the part of Skipped held back by a FIFO group.
	Blocked int `json:"blocked"`
	// CameBack counts messages this move sent that were dead-lettered
	// again during the run (their consumer still fails) and came back as
	// new SQS messages: they are left in the DLQ, not moved round in a
	// loop, and not counted again in Received or Skipped (their first
	// pass through the DLQ counted them in Moved). On FIFO such a message
	// holds back the rest of its group, which is counted Blocked.
	CameBack int `json:"came_back"`
	// Failed counts messages that could not be sent; they stay in the DLQ.
	Failed int `json:"failed"`
	// Refused counts messages a move without a destination would not
	// send: nothing a producer cannot forge says which source of a shared
	// DLQ they came from, or the queue they came from (or, on a DLQ with a
	// single source, the one their failure record names) is not a source
	// of the DLQ in its account and region (see [MoveOptions.To]). They
	// stay in the DLQ (on FIFO with the rest of their group).
	Refused int `json:"refused"`
	// DeleteFailed counts messages sent but not deleted from the DLQ: they
	// will be moved again by a later run, a duplicate that the consumer's
	// dedupe drops (sqsonce-id travels with the message).
	DeleteFailed int `json:"delete_failed"`
	// ByClass counts moved (in a dry run: matched) messages by failure class.
	ByClass map[string]int `json:"by_class"`
	// ByDestination counts moved (in a dry run: matched) messages by
	// destination queue name.
	ByDestination map[string]int `json:"by_destination,omitempty"`
	// Released counts messages made visible again at the end.
	Released int `json:"released"`
	// Seen describes the messages looked at (their classes and bodies)
	// when filters were given, for a person to see what the DLQ holds when
	// they matched nothing; nil without filters.
	Seen *Census `json:"seen,omitempty"`
	// Notes explain anything the numbers do not (FIFO limits, send errors).
	Notes []string `json:"notes,omitempty"`
	// Elapsed is the wall time of the command.
	Elapsed time.Duration `json:"-"`
	// Active is the time from the start to the last message moved (the
	// end of a pass waits for one more empty receive, which Elapsed counts).
	Active time.Duration `json:"-"`
}

// census adds e to Seen, if kept.
func (s *Summary) census(e Entry) {
	if s.Seen != nil {
		s.Seen.Add(e)
	}
}

// Rate is the messages moved per second of Active time.
func (s Summary) Rate() float64 {
	if s.Active <= 0 {
		return 0
	}
	return float64(s.Moved) / s.Active.Seconds()
}

// MarshalJSON adds elapsed_seconds and rate_per_second.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	return json.Marshal(struct {
		plain
		ElapsedSeconds float64 `json:"elapsed_seconds"`
		RatePerSecond  float64 `json:"rate_per_second"`
	}{plain(s), s.Elapsed.Seconds(), s.Rate()})
}

// Plan is Move with DryRun set: it reports what would move, by failure
// class and destination, and changes nothing.
func (r *Redriver) Plan(ctx context.Context, dlq Queue, opts MoveOptions) (Summary, error) {
	opts.DryRun = true
	return r.Move(ctx, dlq, opts)
}

// item is a message on its way to a destination.
type item struct {
	e    Entry
	dest Queue
}

// mover is the state of one Move.
type mover struct {
	r     *Redriver
	p     *pass
	dlq   Queue
	opts  MoveOptions
	sum   Summary
	start time.Time
	total int
	runID string
	next  time.Time // when the next paced batch may go

	sel     *selector
	to      *Queue
	sources []Queue
	sourced bool
}

// Move moves messages from a DLQ to their destination: each batch is sent
// first and each message deleted from the DLQ only after its own send
// succeeded. A message that could not be sent stays in the DLQ and is made
// visible again; a crash between send and delete leaves a duplicate, never
// a loss. Body and message attributes are kept; sqsonce-id is kept (or
// added from the failure's original message id, else the MessageId), and
// sqsonce-failure becomes the [AttrRedrive] history. On FIFO queues group
// ids and order within a group are kept, and every message gets a new
// MessageDeduplicationId so SQS's 5-minute deduplication does not drop a
// message sent recently under its old id. Everything looked at but not
// moved is visible again when Move returns, even on error.
func (r *Redriver) Move(ctx context.Context, dlq Queue, opts MoveOptions) (sum Summary, err error) {
	if opts.Max < 0 || opts.Rate < 0 {
		return Summary{}, errors.New("redrive: Max and Rate must not be negative")
	}
	m := &mover{r: r, p: newPass(r, dlq), dlq: dlq, opts: opts, start: time.Now(), runID: newRunID()}
	m.sum = Summary{DryRun: opts.DryRun, ByClass: map[string]int{}, ByDestination: map[string]int{}}
	if len(opts.Filters) > 0 {
		m.sum.Seen = &Census{}
	}
	m.sel = newSelector(m.p, dlq.FIFO, opts.Filters, opts.Max, &m.sum)
	if opts.To != "" {
		to, err := r.Queue(ctx, opts.To)
		if err != nil {
			return m.sum, err
		}
		if err := kinds(dlq, to); err != nil {
			return m.sum, err
		}
		if to.URL == dlq.URL {
			return m.sum, fmt.Errorf("%w: the destination is the DLQ itself", ErrNoDestination)
		}
		m.to = &to
	}
	m.total = expected(dlq, opts.Max)
	defer func() {
		m.sum.Released, _ = m.p.finish(ctx)
		m.sum.Notes = append(m.sum.Notes, m.p.notes...)
		if m.sum.CameBack > 0 {
			m.sum.Notes = append(m.sum.Notes, fmt.Sprintf("%d message(s) moved by this run came back to the DLQ (their consumer still fails?) and were left there", m.sum.CameBack))
		}
		if dlq.FIFO && m.sum.Blocked > 0 {
			m.sum.Notes = append(m.sum.Notes, fmt.Sprintf("FIFO: %d message(s) in %d group(s) stayed behind a message that did not match or could not be sent (a group cannot be skipped past without reordering it)", m.sum.Blocked, m.sel.blockedGroups()))
		}
		if dlq.FIFO && opts.DryRun {
			m.sum.Notes = append(m.sum.Notes, "FIFO: a dry run sees only the messages SQS hands out while the earlier ones of their group are held; later messages of a group are not counted")
		}
		m.sum.Elapsed = time.Since(m.start)
		r.metrics.record(ctx, "move", dlq, m.sum)
		sum = m.sum
	}()
	next := func() int {
		n := sqslimits.MaxBatchEntries
		if opts.Max > 0 {
			n = min(n, opts.Max-m.sum.Matched)
		}
		if opts.Rate > 0 {
			n = min(n, max(1, int(opts.Rate)))
		}
		return n
	}
	return m.sum, m.p.run(ctx, next, m.batch)
}

// kinds rejects a move between a standard and a FIFO queue.
func kinds(from, to Queue) error {
	switch {
	case !from.FIFO && to.FIFO:
		return fmt.Errorf("%w: %s is a standard queue and %s is FIFO: its messages have no group id", ErrKindMismatch, from.Name, to.Name)
	case from.FIFO && !to.FIFO:
		return fmt.Errorf("%w: %s is FIFO and %s is a standard queue: the order within groups would be lost", ErrKindMismatch, from.Name, to.Name)
	}
	return nil
}

// batch sorts one received batch and moves what should move.
func (m *mover) batch(ctx context.Context, msgs []*sqsmsg.Message) error {
	items, err := m.sort(ctx, msgs)
	if err != nil {
		return err
	}
	m.r.log.Debug("redrive: batch", zap.String("dlq", m.dlq.Name), zap.Int("received", len(msgs)), zap.Int("to_move", len(items)), zap.Bool("dry_run", m.opts.DryRun))
	m.progress(PhaseReceived)
	if len(items) == 0 {
		return nil
	}
	if err := m.pace(ctx, len(items)); err != nil {
		for _, it := range items {
			m.p.hold(it.e.Message)
		}
		return err
	}
	return m.moveItems(ctx, items)
}

// sort decides what becomes of each message of a batch: left in the DLQ
// (blocked behind its FIFO group, come back, not selected, refused),
// counted only (a dry run), or returned to be moved, with its
// destination. On an error every message of the batch not yet moved is
// held.
func (m *mover) sort(ctx context.Context, msgs []*sqsmsg.Message) ([]item, error) {
	var items []item
	for i, msg := range msgs {
		if m.cameBack(msg) {
			// The same dead letter as one counted moved: counted apart.
			m.sum.CameBack++
			m.sel.leave(msg)
			continue
		}
		e := m.r.entry(msg)
		m.sum.Received++
		m.sum.census(e)
		switch {
		case m.sel.groupBlocked(msg):
			continue
		case !m.sel.selected(e):
			m.sum.Skipped++
			m.sel.leave(msg)
			continue
		}
		dest, err := m.destination(ctx, e)
		if errors.Is(err, ErrRefused) {
			m.sum.Refused++
			m.sel.leave(msg)
			m.r.log.Warn("redrive: refused a recorded destination", zap.String("dlq", m.dlq.Name), zap.String("message_id", msg.ID))
			m.note(err.Error())
			continue
		}
		if err != nil {
			for _, rest := range msgs[i:] {
				m.p.hold(rest)
			}
			for _, it := range items {
				m.p.hold(it.e.Message)
			}
			return nil, err
		}
		m.sum.Matched++
		if m.opts.DryRun {
			m.sum.ByClass[e.Class()]++
			m.sum.ByDestination[dest.Name]++
			m.p.hold(msg)
			continue
		}
		items = append(items, item{e: e, dest: dest})
	}
	return items, nil
}

// moveItems sends items round by round (see rounds) and deletes from the
// DLQ what each round sent. It fails only when every send failed.
func (m *mover) moveItems(ctx context.Context, items []item) error {
	sentAny := false
	var sendErr error
	failedGroups := map[string]bool{}
	for _, round := range m.rounds(items) {
		if m.dlq.FIFO {
			// A group whose earlier message failed to send in this batch
			// sends nothing more in this pass: it would be reordered.
			// (Groups stopped in earlier batches, or by a later message
			// that did not match, were sorted out above.)
			round = slices.DeleteFunc(round, func(it item) bool {
				if !failedGroups[it.e.Message.GroupID] {
					return false
				}
				m.sum.Skipped++
				m.sum.Blocked++
				m.p.hold(it.e.Message)
				return true
			})
		}
		ok, err := m.sendRound(ctx, round, failedGroups)
		if err != nil {
			sendErr = err
		}
		if len(ok) == 0 {
			continue
		}
		sentAny = true
		m.settleSent(ctx, ok)
	}
	if sendErr != nil {
		m.note("send: " + sendErr.Error())
		if !sentAny {
			return fmt.Errorf("redrive: every send of a batch failed, stopping: %w", sendErr)
		}
	}
	return nil
}

// sendRound sends one round to its destinations and returns what was
// sent. What could not be sent is counted failed and held; on FIFO its
// group is blocked for the rest of the pass and recorded in failedGroups.
func (m *mover) sendRound(ctx context.Context, round []item, failedGroups map[string]bool) (ok []item, sendErr error) {
	for _, dest := range destinations(round) {
		var group []item
		for _, it := range round {
			if it.dest.URL == dest.URL {
				group = append(group, it)
			}
		}
		good, bad, err := m.send(ctx, dest, group)
		if err != nil {
			sendErr = err
		}
		ok = append(ok, good...)
		for _, it := range bad {
			m.sum.Failed++
			m.sel.leave(it.e.Message)
			if m.dlq.FIFO {
				failedGroups[it.e.Message.GroupID] = true
			}
		}
	}
	return ok, sendErr
}

// settleSent counts sent items as moved and deletes them from the DLQ; a
// message whose delete failed is deleted when the pass sees it again.
func (m *mover) settleSent(ctx context.Context, ok []item) {
	m.sum.Moved += len(ok)
	m.sum.Active = time.Since(m.start)
	m.progress(PhaseSent)
	sent := make([]*sqsmsg.Message, len(ok))
	for i, it := range ok {
		sent[i] = it.e.Message
		m.sum.ByClass[it.e.Class()]++
		m.sum.ByDestination[it.dest.Name]++
	}
	for _, f := range m.p.delete(ctx, sent) {
		m.sum.DeleteFailed++
		m.p.undeleted[f.ID] = true
	}
	m.progress(PhaseDeleted)
}

// note adds a note once, escaped for a terminal (printable.Escape: send
// errors carry a server's text).
func (m *mover) note(s string) {
	s = printable.Escape(s)
	for _, n := range m.sum.Notes {
		if n == s {
			return
		}
	}
	if len(m.sum.Notes) < 20 {
		m.sum.Notes = append(m.sum.Notes, s)
	}
}

// progress reports progress.
func (m *mover) progress(ph Phase) {
	if m.opts.Progress == nil {
		return
	}
	m.opts.Progress(Progress{Phase: ph, Total: m.total, Received: m.sum.Received, Moved: m.sum.Moved,
		Skipped: m.sum.Skipped, Failed: m.sum.Failed, Elapsed: time.Since(m.start)})
}

// pace waits until moving n more messages keeps within Rate: each batch
// waits n/Rate after the previous one (or after the start). Time lost
// waiting for SQS is not made up with a burst.
func (m *mover) pace(ctx context.Context, n int) error {
	if m.opts.Rate <= 0 {
		return nil
	}
	now := time.Now()
	if m.next.IsZero() {
		m.next = m.start
	}
	m.next = later(m.next, now.Add(-time.Second/10)).Add(time.Duration(float64(n) / m.opts.Rate * float64(time.Second)))
	d := m.next.Sub(now)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// rounds splits a batch so that a FIFO group has at most one message per
// round, in order: a message is sent only after the one before it in its
// group was sent (a failed send blocks the rest of its group).
func (m *mover) rounds(items []item) [][]item {
	if !m.dlq.FIFO {
		return [][]item{items}
	}
	var out [][]item
	pos := map[string]int{}
	for _, it := range items {
		g := it.e.Message.GroupID
		i := pos[g]
		pos[g]++
		if i == len(out) {
			out = append(out, nil)
		}
		out[i] = append(out[i], it)
	}
	return out
}

// destinations returns the distinct destinations of items, in order.
func destinations(items []item) []Queue {
	var out []Queue
	seen := map[string]bool{}
	for _, it := range items {
		if !seen[it.dest.URL] {
			seen[it.dest.URL] = true
			out = append(out, it.dest)
		}
	}
	return out
}

// destination picks a message's destination; never the DLQ itself.
func (m *mover) destination(ctx context.Context, e Entry) (Queue, error) {
	q, err := m.pick(ctx, e)
	if err == nil && (q.URL == m.dlq.URL || (q.ARN != "" && q.ARN == m.dlq.ARN)) {
		return Queue{}, fmt.Errorf("%w: the destination of message %s is the DLQ itself", ErrNoDestination, e.Message.ID)
	}
	return q, err
}

// cameBack reports a message that this run moved already and that was
// dead-lettered again since (its redrive history carries this run's random
// id): moving it again would loop. A history from any other writer, whatever
// its redriven_at, does not count.
func (m *mover) cameBack(msg *sqsmsg.Message) bool {
	s := msg.Attribute(AttrRedrive)
	if s == "" {
		return false
	}
	h, err := ParseHistory(s)
	return err == nil && h.Run == m.runID
}

// pick chooses a message's destination: To when given; else the source
// queue it came from, as far as something a producer cannot forge says so
// (see attested), checked to be a source of the DLQ (see
// [Redriver.Sources]) in the DLQ's account and region.
func (m *mover) pick(ctx context.Context, e Entry) (Queue, error) {
	if m.to != nil {
		return *m.to, nil
	}
	if !m.sourced {
		srcs, err := m.r.Sources(ctx, m.dlq)
		if err != nil {
			return Queue{}, err
		}
		for _, s := range srcs {
			if sameAccountRegion(s.ARN, m.dlq.ARN) {
				m.sources = append(m.sources, s)
			}
		}
		m.sourced = true
	}
	if len(m.sources) == 0 {
		return Queue{}, fmt.Errorf("%w: %s has no source queue in its account and region (no queue's RedrivePolicy names it): pass a destination (--to)", ErrNoDestination, m.dlq.Name)
	}
	q, err := m.attested(e)
	if err != nil {
		return Queue{}, err
	}
	if err := kinds(m.dlq, q); err != nil {
		return Queue{}, err
	}
	return q, nil
}

// refuseHint ends every refusal: what lets the message move.
const refuseHint = "pass a destination (--to) to move it anyway"

// attested returns the source a message came from, among the DLQ's
// sources, by what a producer that may send anything to the source queue
// or the DLQ cannot forge, first match wins:
//
//  1. SQS's DeadLetterQueueSourceArn, which SQS stamps on its own
//     maxReceiveCount moves (a sender cannot set it), whatever the message
//     carries;
//  2. the source_queue of a failure record signed with the Redriver's
//     SigningKey for this body (a consumer with the key wrote it);
//  3. on a DLQ with a single source, that source, unless the failure
//     record names another queue.
//
// Anything else, a queue named by 1 or 2 that is no longer a source
// included, is an error wrapping [ErrRefused] that says what to do.
func (m *mover) attested(e Entry) (Queue, error) {
	id, dlq := e.Message.ID, m.dlq.Name
	if arn := e.Message.SystemAttributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)]; arn != "" {
		if q, ok := matchSource(m.sources, arn); ok {
			return q, nil
		}
		return Queue{}, fmt.Errorf("%w: SQS moved message %s here from %s, which is not a source queue of %s in its account and region (now): %s",
			ErrRefused, id, clip(arn, 200), dlq, refuseHint)
	}
	var recorded string
	if e.Failure != nil {
		recorded = e.Failure.SourceQueue
	}
	signed := recorded != "" && m.r.key != nil && e.Failure.Verify(m.r.key, e.Message.Body)
	if signed || (len(m.sources) == 1 && recorded != "") {
		if q, ok := matchSource(m.sources, recorded); ok {
			return q, nil
		}
		return Queue{}, fmt.Errorf("%w: message %s records source queue %s, which is not a source queue of %s in its account and region: %s",
			ErrRefused, id, clip(recorded, 200), dlq, refuseHint)
	}
	if len(m.sources) == 1 {
		return m.sources[0], nil
	}
	if recorded == "" {
		return Queue{}, fmt.Errorf("%w: message %s records no source queue and %s is the DLQ of %d queues (SQS did not move it here, so nothing says which it came from): %s",
			ErrRefused, id, dlq, len(m.sources), refuseHint)
	}
	why := "no signing key was given to check it with (--signing-key-env)"
	switch {
	case m.r.key == nil:
	case e.Failure.Signature == "":
		why = "it is not signed"
	default:
		why = "its signature does not verify with the signing key"
	}
	return Queue{}, fmt.Errorf("%w: message %s records source queue %s and %s is the DLQ of %d queues: a producer can write that record, and %s: %s",
		ErrRefused, id, clip(recorded, 200), dlq, len(m.sources), why, refuseHint)
}

// matchSource finds the queue a recorded source_queue names among the
// DLQ's sources: by ARN, by URL (its account and name; the host is never
// used), or by name. The value is outside input and is only compared.
func matchSource(sources []Queue, recorded string) (Queue, bool) {
	for _, q := range sources {
		if recorded == q.URL || recorded == q.Name || (q.ARN != "" && recorded == q.ARN) {
			return q, true
		}
	}
	account, name, ok := urlAccountName(recorded)
	if !ok {
		return Queue{}, false
	}
	for _, q := range sources {
		if a, ok := parseQueueARN(q.ARN); ok && a.Account == account && a.Name == name {
			return q, true
		}
	}
	return Queue{}, false
}

// sameAccountRegion reports whether two queue ARNs are in one account and
// region.
func sameAccountRegion(a, b string) bool {
	x, ok1 := parseQueueARN(a)
	y, ok2 := parseQueueARN(b)
	return ok1 && ok2 && x.Partition == y.Partition && x.Region == y.Region && x.Account == y.Account
}

// clip quotes outside text for a message or a note: cut to n bytes, every
// rune a terminal could act on escaped (see printable.Quote).
func clip(s string, n int) string { return printable.Quote(s, n) }

// send sends items to dest in batches within SQS's limits, retrying
// entries that failed through no fault of the request once. It returns the
// items sent and those not sent.
func (m *mover) send(ctx context.Context, dest Queue, items []item) (ok, failed []item, err error) {
	for _, chunk := range sendChunks(items, m.size) {
		pending := chunk
		for attempt := 0; attempt < 2 && len(pending) > 0; attempt++ {
			entries := make([]types.SendMessageBatchRequestEntry, len(pending))
			for i, it := range pending {
				entries[i] = m.entry(it, i)
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			out, e := m.r.client.SendMessageBatch(cctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(dest.URL), Entries: entries}, sdkhttp.SQS)
			cancel()
			if e != nil { // the SDK has retried what it could
				err = fmt.Errorf("redrive: send to %s: %w", dest.Name, e)
				m.r.log.Warn("redrive: send batch failed", zap.String("queue", dest.Name), zap.Int("messages", len(pending)), zap.Error(e))
				break
			}
			var retry []item
			seen := make([]bool, len(pending))
			for _, s := range out.Successful {
				if i, ok2 := entryIndex(s.Id, len(pending)); ok2 && !seen[i] {
					seen[i] = true
					ok = append(ok, pending[i])
				}
			}
			for _, f := range out.Failed {
				i, ok2 := entryIndex(f.Id, len(pending))
				if !ok2 || seen[i] {
					continue
				}
				seen[i] = true
				err = fmt.Errorf("redrive: send to %s: %s: %s", dest.Name, aws.ToString(f.Code), aws.ToString(f.Message))
				m.r.log.Warn("redrive: send failed", zap.String("queue", dest.Name), zap.String("message_id", pending[i].e.Message.ID),
					zap.String("code", aws.ToString(f.Code)), zap.Bool("sender_fault", f.SenderFault))
				if f.SenderFault {
					failed = append(failed, pending[i])
				} else {
					retry = append(retry, pending[i])
				}
			}
			for i, it := range pending {
				if !seen[i] { // missing from a malformed response
					retry = append(retry, it)
				}
			}
			pending = retry
		}
		failed = append(failed, pending...)
	}
	return ok, failed, err
}

// entryIndex parses a batch entry Id made by batchID.
func entryIndex(id *string, n int) (int, bool) {
	s := aws.ToString(id)
	if len(s) < 2 || s[0] != 'e' {
		return 0, false
	}
	i, err := strconv.Atoi(s[1:])
	return i, err == nil && i >= 0 && i < n
}

// sendChunks splits items into batches of at most 10 entries and
// maxBatchBytes of payload, each item's payload measured by size.
func sendChunks(items []item, size func(item) int) [][]item {
	var out [][]item
	var cur []item
	total := 0
	for _, it := range items {
		s := size(it)
		if len(cur) == sqslimits.MaxBatchEntries || (len(cur) > 0 && total+s > maxBatchBytes) {
			out, cur, total = append(out, cur), nil, 0
		}
		cur = append(cur, it)
		total += s
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// size is what SQS counts of an item against the batch's payload: the
// message as it will be sent (its history attribute included), plus a
// little for the history's time, which is written at the send.
func (m *mover) size(it item) int {
	return sqslimits.MessageSize(it.e.Message.Body, redriveAttributes(it.e.Message, it.e.Failure, m.dlq.Name, m.runID, m.r.now())) + 16
}

// entry builds the send entry for a moved message.
func (m *mover) entry(it item, i int) types.SendMessageBatchRequestEntry {
	msg := it.e.Message
	e := types.SendMessageBatchRequestEntry{
		Id:                aws.String(batchID(i)),
		MessageBody:       aws.String(msg.Body),
		MessageAttributes: redriveAttributes(msg, it.e.Failure, m.dlq.Name, m.runID, m.r.now()),
	}
	if m.dlq.FIFO {
		e.MessageGroupId = aws.String(msg.GroupID)
		e.MessageDeduplicationId = aws.String(m.runID + "-" + msg.ID)
	}
	return e
}

// redriveAttributes returns a moved message's attributes: all of its own,
// sqsonce-failure replaced by the redrive history, and sqsonce-id added
// when missing, within SQS's 10. sqsonce-id is always there: when the
// message has no room for it, attributes are dropped by the rule the
// consumer uses for dead letters (the consumer's dead-letter rule). The
// history is written only where room is left.
func redriveAttributes(msg *sqsmsg.Message, f *deadletter.Failure, dlq, runID string, now time.Time) map[string]types.MessageAttributeValue {
	attrs := make(map[string]types.MessageAttributeValue, len(msg.Attributes)+2)
	for k, v := range msg.Attributes {
		attrs[k] = v
	}
	old, hadHistory := attrs[AttrRedrive]
	delete(attrs, deadletter.AttrFailure)
	delete(attrs, AttrRedrive)
	if aws.ToString(attrs[sqsmsg.AttrID].StringValue) == "" {
		delete(attrs, sqsmsg.AttrID)
		// DroppedAttributes makes room for two attributes (sqsonce-id and
		// sqsonce-failure), most droppable first; sqsonce-id needs one.
		if need := len(attrs) + 1 - sqslimits.MaxMessageAttributes; need > 0 {
			for _, name := range settle.DroppedAttributes(attrs)[:need] {
				delete(attrs, name)
			}
		}
		id := msg.ID
		if f != nil && f.OriginalMessageID != "" {
			id = f.OriginalMessageID
		}
		attrs[sqsmsg.AttrID] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(id)}
	}
	if len(attrs) >= sqslimits.MaxMessageAttributes {
		return attrs
	}
	var h History
	if hadHistory {
		h, _ = ParseHistory(aws.ToString(old.StringValue))
	}
	h.Count = max(h.Count, 0) + 1
	h.Run = runID
	h.RedrivenAt = now.UTC()
	h.DLQ = dlq
	h.LastFailure = f
	b, _ := json.Marshal(h)
	attrs[AttrRedrive] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(b))}
	return attrs
}

// newRunID returns a random id for one redrive run.
func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
