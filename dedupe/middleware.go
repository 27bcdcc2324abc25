package dedupe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/internal/steprec"
	"github.com/sqsonce/sqsonce/internal/telemetry"
	"github.com/sqsonce/sqsonce/sqsmsg"
	"github.com/sqsonce/sqsonce/step"
)

// Config configures the middleware ([New]).
type Config struct {
	// Store keeps the records: [Memory], dedupedynamo.Store or
	// dedupepg.Store. Required.
	Store Store
	// Lease is how long a claim holds a key before another delivery may take
	// it over; it bounds how long a crashed worker's message waits before
	// it is retried. The lease actually taken is derived from how it is
	// kept alive, so that it cannot lapse while its handler runs:
	//
	//   - Under the consumer, the heartbeat extends it on every tick: the
	//     lease is at least three heartbeat intervals
	//     ([sqsmsg.Message.HeartbeatInterval]), so one failed or late
	//     extension still leaves the next one inside the lease.
	//   - When nothing extends it (the Lambda adapter) and the handler's
	//     context has a deadline, the lease runs to that deadline: it covers
	//     the whole invocation.
	//   - It never outlives the handler context's deadline.
	//
	// Defaults to 1 minute.
	Lease time.Duration
	// FingerprintFunc fingerprints a message: the same key with a different
	// fingerprint is key reuse. Defaults to [Fingerprint] of the body.
	FingerprintFunc func(*sqsmsg.Message) string
	// SettleTimeout bounds the Complete or Release call made after the
	// handler returns (it runs even when the handler's context is done).
	// Defaults to 10 seconds.
	SettleTimeout time.Duration
	// Logger receives key reuse (error), lost leases (warn) and store
	// failures. Defaults to zap.NewNop().
	Logger *zap.Logger
	// Observer receives, with LeaseLost, every event after which the
	// handler's effect may repeat and that the consumer cannot see itself:
	// the handler succeeded but its record could not be completed (the
	// lease was taken over, or the store failed), so a later delivery runs
	// it again. A lease lost while the handler runs is reported by the
	// consumer (the heartbeat's error, which cancels the handler's context
	// with consumer.ErrLeaseLost), not again here. Set it to the consumer's
	// (or Lambda adapter's) Observer. An Observer that is also a
	// [StepObserver] gets the step events of every message too (package
	// step: unknown outcomes, reconciles, parked steps). Defaults to
	// consumer.NopObserver.
	Observer sqsmsg.Observer
	// MeterProvider, when set, counts every claim in sqsonce.dedupe.results
	// by result: claimed, duplicate, in_progress, key_reused, or error (the
	// store failed); and every step event in sqsonce.dedupe.steps by event
	// (unknown, reconcile_found, reconcile_not_found,
	// reconcile_still_unknown, parked, rerun: see package step). Whatever
	// it is set to, the result is also recorded on the message's span
	// (sqsonce.dedupe.result) when the consumer traces. Defaults to nil:
	// nothing is measured.
	MeterProvider metric.MeterProvider
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Middleware is the dedupe middleware; [Middleware.Wrap] is its
// consumer.Middleware.
type Middleware struct {
	cfg     Config
	results *telemetry.Results
	steps   *telemetry.Results
	stepObs StepObserver
}

// New returns the middleware, or an error naming the bad field.
func New(cfg Config) (*Middleware, error) {
	if cfg.Store == nil {
		return nil, errors.New("dedupe: Config.Store is required (dedupe.NewMemory, dedupedynamo.New or dedupepg.New)")
	}
	if cfg.Lease < 0 || cfg.SettleTimeout < 0 {
		return nil, errors.New("dedupe: Config.Lease and SettleTimeout must not be negative")
	}
	cfg.Lease = cmp.Or(cfg.Lease, time.Minute)
	cfg.SettleTimeout = cmp.Or(cfg.SettleTimeout, 10*time.Second)
	if cfg.FingerprintFunc == nil {
		cfg.FingerprintFunc = func(m *sqsmsg.Message) string { return Fingerprint(m.Body) }
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Observer == nil {
		cfg.Observer = sqsmsg.NopObserver{}
	}
	results := telemetry.NewResults(cfg.MeterProvider, "sqsonce.dedupe.results",
		"Dedupe claims, by result.", "{message}", "result", resultNames[:]...)
	steps := telemetry.NewResults(cfg.MeterProvider, "sqsonce.dedupe.steps",
		"Step events of messages (package step), by event.", "{event}", "event", step.EventKinds...)
	stepObs, _ := cfg.Observer.(StepObserver)
	return &Middleware{cfg: cfg, results: results, steps: steps, stepObs: stepObs}, nil
}

// StepObserver is implemented by a [Config].Observer that wants the step
// events of the messages it observes (package step).
type StepObserver interface {
	StepEvent(msg *sqsmsg.Message, e step.Event)
}

// Wrap returns next behind the middleware, which runs each message's
// handler at most once per key with Config.Store:
//
//   - Claim before the handler. Duplicate → a [*DuplicateError], which is
//     [consumer.ErrDuplicate] (acked,
//     handler not run); in progress elsewhere → [consumer.RetryAfter] a
//     second on the message's first receive, so that a duplicate of a fast
//     handler settles in about a second, and after the other owner's
//     remaining lease on later receives, so that a key held by a crashed
//     worker costs the message at most two receives toward the queue's
//     maxReceiveCount; key reused →
//     [consumer.Permanent] with a [*KeyReuseError] (dead-lettered, class
//     "key_reuse").
//   - While the handler runs, every consumer heartbeat extends the lease;
//     when the lease is lost the handler's context is cancelled.
//   - Handler success → Complete. Any failure (transient or permanent) →
//     Release, so a retry or a redrive processes the message again.
//
// When the store is a [StepStore] (every store of sqsonce), the handler's
// context carries a step recorder: [step.Run] records each step in the
// message's record, and a retry, a takeover after a crash or a redrive
// resumes after the last completed step (the record is kept on Release
// when it holds steps). A step whose outcome is unknown fails the
// message, even if the handler ignored Run's error: transient (retried
// with backoff; the next attempt reconciles or reruns it), or, parked,
// dead-lettered with class outcome_unknown and the step's name. A final
// step that is dedupedynamo.Transactional or dedupepg.Transactional of
// the same store completes the claimed record in its own transaction.
//
// Store errors are returned as transient errors (the message is retried).
// Wrap is a consumer.Middleware: pass it in consumer.Config.Middleware.
func (m *Middleware) Wrap(next sqsmsg.Handler) sqsmsg.Handler {
	return &middleware{store: m.cfg.Store, opts: m.cfg, next: next, results: m.results, steps: m.steps, stepObs: m.stepObs}
}

// resultNames are the values of the result attribute, by Status (0: the
// claim failed).
var resultNames = [...]string{"error", "claimed", "duplicate", "in_progress", "key_reused"}

// middleware is one wrapped handler.
type middleware struct {
	store   Store
	opts    Config
	next    sqsmsg.Handler
	results *telemetry.Results
	steps   *telemetry.Results
	stepObs StepObserver
}

// stepEvent counts, logs and passes on one step event of msg.
func (m *middleware) stepEvent(ctx context.Context, msg *sqsmsg.Message, e step.Event) {
	m.steps.Add(ctx, e.Kind, 1)
	switch e.Kind {
	case step.EventUnknown, step.EventParked, step.EventReconcileStillUnknown:
		m.opts.Logger.Warn("dedupe: step outcome "+e.Kind,
			zap.String("message_id", msg.ID), zap.String("dedupe_key", msg.Key()),
			zap.String("step", e.Step), zap.Stringer("policy", e.Policy), zap.Error(e.Err))
	default:
		m.opts.Logger.Info("dedupe: step "+e.Kind,
			zap.String("message_id", msg.ID), zap.String("dedupe_key", msg.Key()), zap.String("step", e.Step))
	}
	if m.stepObs != nil {
		m.stepObs.StepEvent(msg, e)
	}
}

// observe counts the claim's result and records it on the message's span.
func (m *middleware) observe(ctx context.Context, st Status) {
	name := "error"
	if int(st) > 0 && int(st) < len(resultNames) {
		name = resultNames[st]
	}
	m.results.Add(ctx, name, 1)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("sqsonce.dedupe.result", name))
	}
}

// recheck is the delay before a delivery that found its key in progress
// (receiveCount-th receive) looks again. On its first receive, 1 s: the
// other owner is most likely alive and about to finish (an overlapping
// duplicate). From the second receive on, the rest of the other owner's
// lease: that owner may be dead (the message was delivered again after a
// crash, or the short recheck found it still held), and every recheck
// costs a receive toward the queue's maxReceiveCount, which SQS enforces
// by moving the message to the dead-letter queue unread. Waiting on a
// lease thus costs a message at most two receives. At least 1 s (SQS's
// visibility is in whole seconds).
func (m *middleware) recheck(receiveCount int, leaseUntil time.Time) time.Duration {
	rest := leaseUntil.Sub(m.opts.NowFunc())
	if receiveCount <= 1 {
		rest = min(rest, time.Second)
	}
	return max(rest, time.Second)
}

// leaseIntervals is the least number of heartbeat intervals a lease lasts
// when the heartbeat extends it.
const leaseIntervals = 3

// lease is the lease for a claim or an extension of a handler that runs
// under ctx and whose heartbeat ticks every every (0: no heartbeat). See
// Config.Lease.
func (m *middleware) lease(ctx context.Context, every time.Duration) time.Duration {
	l := m.opts.Lease
	dl, ok := ctx.Deadline()
	switch {
	case every > 0:
		l = max(l, leaseIntervals*every)
	case ok:
		l = time.Until(dl) // nothing extends it: it covers the whole run
	}
	if ok {
		l = min(l, time.Until(dl)) // deadlines are wall-clock times
	}
	return l
}

func (m *middleware) Handle(ctx context.Context, msg *sqsmsg.Message) error {
	key := msg.Key()
	// The message's logger is built only when something is logged: With
	// encodes its fields at once, a cost per message for nothing.
	log := func() *zap.Logger {
		return m.opts.Logger.With(zap.String("message_id", msg.ID), zap.String("dedupe_key", key))
	}
	every := msg.HeartbeatInterval()
	lease := m.lease(ctx, every)
	if lease <= 0 {
		return fmt.Errorf("dedupe: no time left to claim %q: %w", key, context.DeadlineExceeded)
	}
	fp := m.opts.FingerprintFunc(msg)
	c, err := m.store.Claim(ctx, key, fp, lease)
	if err != nil {
		m.observe(ctx, 0)
		return fmt.Errorf("dedupe: claim %q: %w", key, err)
	}
	m.observe(ctx, c.Status)
	switch c.Status {
	case Claimed:
	case Duplicate:
		return &DuplicateError{Key: key}
	case InProgress:
		return sqsmsg.RetryAfter(&InProgressError{Key: key, LeaseUntil: c.LeaseUntil}, m.recheck(msg.ReceiveCount, c.LeaseUntil))
	case KeyReused:
		err := &KeyReuseError{Key: key, Fingerprint: fp, Stored: c.Fingerprint}
		log().WithOptions(noStack).Error("dedupe: KEY REUSE: the same dedupe key arrived with a different body; dead-lettering it",
			zap.String("fingerprint", fp), zap.String("stored_fingerprint", c.Fingerprint))
		return sqsmsg.Permanent(err)
	default:
		return fmt.Errorf("dedupe: claim %q: unexpected status %d", key, c.Status)
	}

	o := &owner{m: m, key: key, msgID: msg.ID, token: c.Token, every: every, until: c.LeaseUntil, log: m.opts.Logger}
	hctx := ctx
	var rec *steprec.Recorder
	if ss, ok := m.store.(StepStore); ok {
		if len(c.Steps) > 0 {
			log().Debug("dedupe: resuming after the steps recorded", zap.Int("steps", len(c.Steps)))
		}
		token := c.Token
		rec = steprec.New(c.Steps, func(ctx context.Context, steps map[string]step.Record) error {
			return ss.SaveSteps(ctx, key, token, steps)
		}, func(e step.Event) { m.stepEvent(ctx, msg, e) })
		o.claim = &steprec.Claim{Store: m.store, Key: key, Token: token}
		hctx = step.WithRecorder(steprec.WithClaim(ctx, o.claim), rec)
	}
	msg.OnHeartbeat(func(hbctx context.Context) error { return o.extend(ctx, hbctx) })
	herr := m.next.Handle(hctx, msg)
	o.finish()
	if herr == nil && rec != nil {
		if u := rec.Blocked(); u != nil {
			// The handler went on past a step of unknown outcome: the
			// message is not done.
			herr = u
		}
	}

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.SettleTimeout)
	defer cancel()
	if herr == nil && o.claim != nil && o.claim.Completed() {
		return nil // the handler's transaction completed the record
	}
	if herr == nil {
		if err := m.store.Complete(sctx, key, c.Token); err != nil {
			err = fmt.Errorf("dedupe: complete %q: %w", key, err)
			if errors.Is(err, ErrNotOwner) {
				log().Warn("dedupe: lease lost before completion: another delivery owns the key; the effect may repeat", zap.Error(err))
			} else {
				log().Warn("dedupe: completion failed: the claim stays until its lease ends, then the message runs again; the effect may repeat", zap.Error(err))
			}
			if !errors.Is(context.Cause(ctx), sqsmsg.ErrLeaseLost) { // else reported when it was lost
				m.opts.Observer.LeaseLost(msg, fmt.Errorf("%w: %w", sqsmsg.ErrLeaseLost, err))
			}
			return err
		}
		return nil
	}
	if err := m.store.Release(sctx, key, c.Token); err != nil {
		if errors.Is(err, ErrNotOwner) {
			log().Debug("dedupe: release: the claim is no longer ours", zap.Error(err))
		} else {
			// The claim stays until its lease ends; the retry waits for it.
			log().Warn("dedupe: release failed", zap.Error(err))
		}
	}
	return herr
}

// owner is one claim while its handler runs.
type owner struct {
	m     *middleware
	key   string
	token string
	msgID string
	every time.Duration  // the heartbeat interval
	log   *zap.Logger    // without the message's fields: see logger
	claim *steprec.Claim // nil when the store records no steps

	mu    sync.Mutex
	until time.Time
	done  bool
}

// extend runs on each heartbeat tick. It reports the lease lost when the
// store says the claim is not ours, or when the lease has run out without
// a successful extension.
func (o *owner) extend(ctx, hctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	lease := o.m.lease(ctx, o.every)
	if lease <= 0 {
		return nil // the deadline cancels the handler; the lease ends with it
	}
	hctx, cancel := context.WithTimeout(hctx, o.m.opts.SettleTimeout)
	defer cancel()
	err := o.m.store.Extend(hctx, o.key, o.token, lease)
	now := o.m.opts.NowFunc()
	switch {
	case err == nil:
		o.until = now.Add(lease)
		return nil
	case errors.Is(err, ErrNotOwner) && o.claim != nil && o.claim.Settling():
		return nil // the handler's own transaction completed the record
	case errors.Is(err, ErrNotOwner):
		o.logger().Warn("dedupe: lease lost: another delivery took the key over", zap.Error(err))
		return fmt.Errorf("dedupe: extend %q: %w", o.key, err)
	case !now.Before(o.until):
		o.logger().Warn("dedupe: lease ran out and could not be extended", zap.Error(err))
		return fmt.Errorf("dedupe: extend %q: lease ended: %w", o.key, err)
	default:
		o.logger().Warn("dedupe: extend failed; retrying on the next tick", zap.Error(err))
		return nil
	}
}

// logger is the owner's logger with the message's fields.
func (o *owner) logger() *zap.Logger {
	return o.log.With(zap.String("message_id", o.msgID), zap.String("dedupe_key", o.key))
}

func (o *owner) finish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done = true
}

// noStack keeps the stack trace a logger adds at error level (as
// zap.NewProduction's does) off a line that reports an outcome, such as
// key reuse: the library's own frames say nothing about its cause.
var noStack = zap.AddStacktrace(zap.LevelEnablerFunc(func(zapcore.Level) bool { return false }))
