package heartbeat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/sdkhttp"
	"github.com/sqsonce/sqsonce/internal/sqslimits"
)

// SQSAPI is the SQS call the heartbeat makes. *sqs.Client satisfies it.
type SQSAPI interface {
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Errors passed to a handle's lost callback.
var (
	// ErrMaxVisibility: the handle reached MaxLifetime (SQS's 12 hours)
	// and cannot be kept invisible any longer.
	ErrMaxVisibility = errors.New("heartbeat: visibility limit reached")
	// ErrExpired: the visibility ran out before an extension succeeded, so
	// the message may already be with another consumer.
	ErrExpired = errors.New("heartbeat: visibility expired before it could be extended")
)

// EntryError is an extension SQS refused for one handle (for example
// ReceiptHandleIsInvalid, or the message is no longer in flight).
type EntryError struct {
	Code    string
	Message string
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("heartbeat: extension refused: %s: %s", e.Code, e.Message)
}

// DefaultParallel is Config.Parallel's default.
const DefaultParallel = 4

// DefaultCallTimeout caps Config.CallTimeout's default: an extension
// call that hangs is given up after this long, as the consumer gives up a
// settle call, and the handles it carried are tried again on the next
// tick.
const DefaultCallTimeout = 20 * time.Second

// Config configures a Heartbeat.
type Config struct {
	// Client makes the ChangeMessageVisibilityBatch calls. Required.
	Client SQSAPI
	// QueueURL is the queue the handles belong to. Required.
	QueueURL string
	// Visibility is how long each extension keeps a message invisible, and
	// how long a newly added handle is assumed to be invisible for (the
	// visibility it was received with). Whole seconds. Required.
	Visibility time.Duration
	// Interval is the time between ticks. A handle is extended on the
	// tick that finds it within two intervals of running out. Must be
	// shorter than Visibility. Defaults to Visibility/3.
	Interval time.Duration
	// MaxLifetime caps the visibility of a handle, counted from the time
	// passed to Add. Defaults to SQS's limit on a message's visibility
	// counted from its receive, sqslimits.MaxVisibility (12h).
	MaxLifetime time.Duration
	// CallTimeout bounds each ChangeMessageVisibilityBatch call. A call
	// that hangs holds up the next tick (never a delete: see Remove), so
	// it must be short beside the Interval. Defaults to
	// DefaultCallTimeout, or to Interval when that is shorter.
	CallTimeout time.Duration
	// Parallel is how many batch calls a tick makes at once. Defaults to
	// DefaultParallel.
	Parallel int
	// OnTick, when set, runs at the end of every tick (the consumer uses it
	// to extend dedupe leases). It must return within about an Interval.
	OnTick func(ctx context.Context)
	// OnFailure, when set, is called when extending n handles failed: a
	// whole call (err is the call's error) or refused entries.
	OnFailure func(n int, err error)
	// Logger logs failed extensions. Defaults to a no-op logger.
	Logger *zap.Logger
	// NowFunc returns the current time. Defaults to time.Now.
	NowFunc func() time.Time
}

// Heartbeat keeps a set of receipt handles invisible.
type Heartbeat struct {
	cfg Config
	log *zap.Logger

	// kick asks Run for a round at once: a handle was added that is due
	// for extension before the next tick could extend it in time.
	kick chan struct{}

	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	handle    string
	limit     time.Time // never visible-until past this
	deadline  time.Time // when the current visibility runs out (at the latest, when due)
	lost      Owner
	inflight  chan struct{} // closed when the extension carrying this entry returns
	suspended bool          // neither extended nor expired until resumed
	// due: extend at the next round, however far deadline seems; set for
	// a handle whose visibility may run out sooner than deadline says, or
	// before a regular tick could extend it in time.
	due bool
}

// New checks cfg and returns a Heartbeat. Call Run to start ticking.
func New(cfg Config) (*Heartbeat, error) {
	if cfg.Client == nil {
		return nil, errors.New("heartbeat: Client is required")
	}
	if cfg.QueueURL == "" {
		return nil, errors.New("heartbeat: QueueURL is required")
	}
	if cfg.Visibility < time.Second || cfg.Visibility > sqslimits.MaxVisibility {
		return nil, fmt.Errorf("heartbeat: Visibility %s must be between 1s and 12h", cfg.Visibility)
	}
	cfg.Interval = cmp.Or(cfg.Interval, cfg.Visibility/3)
	if cfg.Interval <= 0 || cfg.Interval >= cfg.Visibility {
		return nil, fmt.Errorf("heartbeat: Interval %s must be positive and shorter than Visibility %s", cfg.Interval, cfg.Visibility)
	}
	cfg.MaxLifetime = cmp.Or(cfg.MaxLifetime, sqslimits.MaxVisibility)
	if cfg.MaxLifetime < 0 || cfg.MaxLifetime > sqslimits.MaxVisibility {
		return nil, fmt.Errorf("heartbeat: MaxLifetime %s must be between 0 and 12h", cfg.MaxLifetime)
	}
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, min(cfg.Interval, DefaultCallTimeout))
	if cfg.CallTimeout < 0 {
		return nil, fmt.Errorf("heartbeat: CallTimeout %s must not be negative", cfg.CallTimeout)
	}
	cfg.Parallel = cmp.Or(cfg.Parallel, DefaultParallel)
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Heartbeat{cfg: cfg, log: log, kick: make(chan struct{}, 1), entries: map[string]*entry{}}, nil
}

// Owner is what the heartbeat tells when a handle's visibility can no
// longer be kept.
type Owner interface {
	LeaseLost(err error)
}

// LostFunc is a function as an [Owner].
type LostFunc func(error)

// LeaseLost calls f.
func (f LostFunc) LeaseLost(err error) { f(err) }

// Received is one handle of a receive, for [Heartbeat.AddBatch]: Owner,
// when not nil, is told, at most once and from the heartbeat's goroutine,
// if the handle's visibility can no longer be kept; the handle is then no
// longer tracked.
type Received struct {
	Handle string
	Owner  Owner
}

// Add tracks handle, received at receivedAt: both its visibility and
// SQS's 12 hours are counted from then. lost, when not nil, is called at
// most once, from the heartbeat's goroutine, if the handle's visibility can
// no longer be kept; the handle is then no longer tracked. For a handle
// from a long poll, use [Heartbeat.AddReceived].
//
// A handle whose visibility ends within two intervals (received a while
// before it is added) is extended at once: Run makes a round as soon as
// it is added, without waiting for the next tick, which might come too
// late.
func (h *Heartbeat) Add(handle string, receivedAt time.Time, lost func(error)) {
	h.add(receivedAt, receivedAt, []Received{{Handle: handle, Owner: ownerOf(lost)}}, dueIfNear)
}

// AddDue tracks handle, whose visibility began at some time not known,
// no later than receivedAt: a message received again, whose last receive
// SQS does not date (it reports only the first). Its visibility may be
// about to run out, so it is extended at once: Run makes a round as soon
// as it is added. Until an extension succeeds it is counted as invisible
// until receivedAt plus the visibility at the latest, and SQS's 12 hours
// are counted from receivedAt. lost is as for [Heartbeat.Add]; an
// extension SQS refuses (the visibility had run out) reports it lost.
func (h *Heartbeat) AddDue(handle string, receivedAt time.Time, lost func(error)) {
	h.add(receivedAt, receivedAt, []Received{{Handle: handle, Owner: ownerOf(lost)}}, dueNow)
}

// ownerOf is lost as an Owner (nil when lost is nil).
func ownerOf(lost func(error)) Owner {
	if lost == nil {
		return nil
	}
	return LostFunc(lost)
}

// AddReceived tracks handle, returned by a receive call made at callStart
// whose response came at returned. SQS's 12 hours are counted from
// callStart (the earliest the message can have been received), the
// visibility from returned: SQS starts a message's visibility when the
// receive picks it, which in a long poll can be up to WaitTimeSeconds after
// the call was made. lost is as for [Heartbeat.Add].
func (h *Heartbeat) AddReceived(handle string, callStart, returned time.Time, lost func(error)) {
	h.AddBatch(callStart, returned, []Received{{Handle: handle, Owner: ownerOf(lost)}})
}

// AddBatch tracks the handles one receive call returned, as AddReceived
// does each, under one hold of the lock and in one allocation.
func (h *Heartbeat) AddBatch(callStart, returned time.Time, rs []Received) {
	h.add(callStart, returned, rs, fresh)
}

// addKind says when added handles are due for extension.
type addKind int

const (
	fresh     addKind = iota // just received: on the ticks
	dueIfNear                // at once if within a round's horizon
	dueNow                   // at once
)

// add tracks rs and, when they are due at once, asks Run for a round.
func (h *Heartbeat) add(callStart, returned time.Time, rs []Received, kind addKind) {
	if len(rs) == 0 {
		return
	}
	if returned.Before(callStart) {
		returned = callStart
	}
	limit := callStart.Add(h.cfg.MaxLifetime)
	deadline := returned.Add(h.cfg.Visibility)
	if deadline.After(limit) {
		deadline = limit
	}
	// Near: the next tick might come too late to extend it with an
	// interval to spare.
	due := kind == dueNow || kind == dueIfNear && deadline.Before(h.cfg.NowFunc().Add(2*h.cfg.Interval))
	es := make([]entry, len(rs))
	h.mu.Lock()
	for i, r := range rs {
		e := &es[i]
		e.handle, e.limit, e.deadline, e.lost, e.due = r.Handle, limit, deadline, r.Owner, due
		h.entries[r.Handle] = e
	}
	h.mu.Unlock()
	if due {
		select {
		case h.kick <- struct{}{}:
		default: // a round is asked for already
		}
	}
}

// Remove stops tracking handle and reports whether it was tracked. It
// returns at once, even while an extension that includes handle is in
// flight, so a delete made after Remove never waits for the heartbeat.
// That extension's outcome is then ignored: a refusal is not reported
// lost (the handle may have been deleted meanwhile, and an extension that
// reaches SQS after the delete is harmless). Before changing the
// handle's visibility, use [Heartbeat.Detach] instead.
func (h *Heartbeat) Remove(handle string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.entries[handle]
	delete(h.entries, handle)
	return ok
}

// closed is a closed channel: no extension in flight.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Detach stops tracking handle, as Remove does, at once, and returns a
// channel that is closed once no extension that includes handle is in
// flight (at once when none is; at the latest after CallTimeout). A
// caller that changes the handle's visibility waits on it first: an
// extension that reached SQS after the change would undo it (a retry's
// delay, a release's 0) and keep the message invisible for Visibility.
// A delete need not wait.
func (h *Heartbeat) Detach(handle string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.entries[handle]
	delete(h.entries, handle)
	if ok && e.inflight != nil {
		return e.inflight
	}
	return closed
}

// RemoveBatch stops tracking handles, as Remove does each, under one hold
// of the lock.
func (h *Heartbeat) RemoveBatch(handles []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, handle := range handles {
		delete(h.entries, handle)
	}
}

// Suspend stops extending handle without forgetting it, and reports
// whether it is still tracked. Like Remove, it returns at once, even while
// an extension that includes handle is in flight; should that extension
// be refused (the handle was deleted meanwhile), the handle is not
// reported lost. A suspended handle is neither extended nor reported lost
// until [Heartbeat.Resume]; use it while a delete is tried, so that a
// delete that fails can be handed back to the heartbeat.
func (h *Heartbeat) Suspend(handle string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.entries[handle]
	if ok {
		e.suspended = true
	}
	return ok
}

// Resume extends a suspended handle again from the next tick (reporting
// it lost there if its visibility ran out meanwhile), and reports whether
// it is still tracked.
func (h *Heartbeat) Resume(handle string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.entries[handle]
	if ok {
		e.suspended = false
	}
	return ok
}

// Tracked reports whether handle is tracked. It is false once the handle
// was removed, and also once a tick or an extension found it lost, even
// before its lost callback has run: every handle found lost in one round
// stops being tracked before any of their callbacks is called. A caller
// that learns of one handle's loss from its callback can therefore check
// the others here without racing the callbacks still to come.
func (h *Heartbeat) Tracked(handle string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.entries[handle]
	return ok
}

// Len returns the number of tracked handles.
func (h *Heartbeat) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.entries)
}

// Run ticks every Interval until ctx is done, then returns ctx's error.
// Between ticks it makes a round at once for handles added due (see
// [Heartbeat.AddDue]), extending only those. An extension in flight when
// ctx is cancelled is cut short.
func (h *Heartbeat) Run(ctx context.Context) error {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			h.Tick(ctx)
		case <-h.kick:
			h.round(ctx, true)
		}
	}
}

type lostCall struct {
	o   Owner
	err error
}

// Tick runs one round: it extends every handle within two intervals of
// running out, or due (in batches of 10), reports lost handles, then calls
// OnTick.
func (h *Heartbeat) Tick(ctx context.Context) {
	h.round(ctx, false)
	if h.cfg.OnTick != nil {
		h.cfg.OnTick(ctx)
	}
}

// round extends the handles due, and, unless dueOnly, those within two
// intervals of running out; it reports the lost ones among them.
func (h *Heartbeat) round(ctx context.Context, dueOnly bool) {
	now := h.cfg.NowFunc()
	horizon := now.Add(2 * h.cfg.Interval)
	var lost []lostCall
	var batches [][]*entry
	var cur []*entry

	h.mu.Lock()
	for _, e := range h.entries {
		if e.inflight != nil || e.suspended || (dueOnly && !e.due) || (!e.due && !e.deadline.Before(horizon)) {
			continue
		}
		if !now.Before(e.deadline) {
			delete(h.entries, e.handle)
			err := ErrExpired
			if e.limit.Sub(now) < 2*h.cfg.Interval+time.Second {
				err = ErrMaxVisibility
			}
			lost = append(lost, lostCall{e.lost, err})
			continue
		}
		if e.limit.Sub(now) < time.Second || !e.deadline.Before(e.limit.Add(-time.Second)) {
			continue // at its limit: nothing more to ask; lost when it runs out
		}
		cur = append(cur, e)
		if len(cur) == sqslimits.MaxBatchEntries {
			batches = append(batches, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	for _, b := range batches {
		done := make(chan struct{})
		for _, e := range b {
			e.inflight = done
		}
	}
	h.mu.Unlock()
	h.report(lost)

	sem := make(chan struct{}, h.cfg.Parallel)
	var wg sync.WaitGroup
	for _, b := range batches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h.extend(ctx, now, b)
		})
	}
	wg.Wait()
}

// extend makes one ChangeMessageVisibilityBatch call for b.
func (h *Heartbeat) extend(ctx context.Context, now time.Time, b []*entry) {
	in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(h.cfg.QueueURL)}
	secs := make([]int32, len(b))
	for i, e := range b {
		ext := min(h.cfg.Visibility, e.limit.Sub(now))
		secs[i] = int32(ext / time.Second)
		in.Entries = append(in.Entries, types.ChangeMessageVisibilityBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(i)),
			ReceiptHandle:     aws.String(e.handle),
			VisibilityTimeout: secs[i],
		})
	}
	cctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	out, err := h.cfg.Client.ChangeMessageVisibilityBatch(cctx, in, sdkhttp.SQS)
	cancel()

	failed := map[string]types.BatchResultErrorEntry{}
	if err == nil {
		for _, f := range out.Failed {
			failed[aws.ToString(f.Id)] = f
		}
	}
	var lost []lostCall
	refused, unextended := 0, 0
	h.mu.Lock()
	done := b[0].inflight
	for i, e := range b {
		e.inflight = nil
		if h.entries[e.handle] != e {
			continue // removed while the call was in flight: no longer ours to judge
		}
		if err != nil {
			if !e.suspended {
				unextended++
			}
			continue // the next tick tries again; ErrExpired if it never works
		}
		if f, ok := failed[strconv.Itoa(i)]; ok {
			if e.suspended {
				continue // its delete may have gone through meanwhile: Resume tells
			}
			if f.SenderFault {
				delete(h.entries, e.handle)
				lost = append(lost, lostCall{e.lost, &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message)}})
			}
			refused++
			continue
		}
		e.deadline = now.Add(time.Duration(secs[i]) * time.Second)
		e.due = false
	}
	close(done)
	h.mu.Unlock()

	if err != nil {
		// Only the handles still kept count: those removed or suspended
		// meanwhile are being settled.
		if ctx.Err() == nil && unextended > 0 {
			h.log.Warn("heartbeat: extend visibility", zap.Int("handles", unextended), zap.Error(err))
			h.failure(unextended, fmt.Errorf("heartbeat: change visibility batch: %w", err))
		}
		return
	}
	if refused > 0 {
		h.log.Warn("heartbeat: extensions refused", zap.Int("handles", refused))
		h.failure(refused, fmt.Errorf("heartbeat: %d extensions refused", refused))
	}
	h.report(lost)
}

func (h *Heartbeat) failure(n int, err error) {
	if h.cfg.OnFailure != nil {
		h.cfg.OnFailure(n, err)
	}
}

func (h *Heartbeat) report(lost []lostCall) {
	for _, l := range lost {
		if l.o != nil {
			l.o.LeaseLost(l.err)
		}
	}
}
