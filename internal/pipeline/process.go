// Package pipeline is the per-message path of every runtime: the
// long-poll consumer, the Lambda adapter (sqslambda) and consumertest
// build a [Processor] from their configuration and call it for each
// message. It sets the message's key, runs the middleware and handler
// with panic recovery, reports HandlerDone to the Observer and
// classifies the handler's error into a [sqsmsg.Result]. It does not
// settle the message: the caller does what the Result's Outcome says
// (internal/settle decides how).
package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/internal/delivery"
	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/telemetry"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// Config is the part of a runtime's configuration the path uses; the
// fields mean what consumer.Config's fields of the same names mean.
type Config struct {
	Handler     sqsmsg.Handler
	Middleware  []sqsmsg.Middleware
	Classifier  sqsmsg.Classifier
	Backoff     sqsmsg.Backoff
	MaxAttempts int
	KeyFunc     sqsmsg.KeyFunc
	Logger      *zap.Logger
	Observer    sqsmsg.Observer
	Payload     sqsmsg.PayloadConfig
	// Pause is the retry delay of an Unavailable without a Retry-After
	// (consumer.BackPressure.Pause). Defaults to DefaultPause.
	Pause time.Duration
	// NowFunc tells whether a message with a not-before time is due.
	// Defaults to time.Now.
	NowFunc func() time.Time
}

// Processor is the per-message path configured from a [Config]: it sets
// the message's key, runs the middleware and handler with panic recovery,
// and classifies the result. It does not settle the message: the caller
// deletes, retries, dead-letters or releases it as [sqsmsg.Result.Outcome]
// says.
type Processor struct {
	handler     sqsmsg.Handler
	middleware  []sqsmsg.Middleware
	classifier  sqsmsg.Classifier
	backoff     sqsmsg.Backoff
	maxAttempts int
	keyFunc     sqsmsg.KeyFunc
	logger      *zap.Logger
	observer    sqsmsg.Observer
	payload     payload.Decoder
	pause       time.Duration
	now         func() time.Time
	// tel starts each message's process span and busy counts the
	// running handlers, around the middleware and handler: found in
	// the Observer (see [Instrument] and [Busy]), so that neither is a
	// middleware whose closure is built again for every message.
	tel  *telemetry.Consumer
	busy func(delta int)
}

// DefaultPause is [Config.Pause]'s default, consumer.DefaultPause.
const DefaultPause = 5 * time.Second

// New configures the path from cfg; a nil Logger or Observer does
// nothing, and without a Handler every message fails. The Observer is
// guarded (see [Guard]): a panic in one of its methods is recovered and
// logged.
func New(cfg Config) *Processor {
	p := &Processor{
		handler:     cfg.Handler,
		middleware:  cfg.Middleware,
		classifier:  cfg.Classifier,
		backoff:     cfg.Backoff,
		maxAttempts: cfg.MaxAttempts,
		keyFunc:     cfg.KeyFunc,
		logger:      cfg.Logger,
		observer:    cfg.Observer,
		payload:     decoder(cfg.Payload),
		pause:       cmp.Or(cfg.Pause, DefaultPause),
		now:         cfg.NowFunc,
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.handler == nil {
		p.handler = sqsmsg.HandlerFunc(func(context.Context, *sqsmsg.Message) error { return errors.New("consumer: no handler") })
	}
	if p.logger == nil {
		p.logger = zap.NewNop()
	}
	p.observer = Guard(p.observer, p.logger)
	p.hooks(p.observer)
	return p
}

// hooks finds, in the wrappers of o, the telemetry [Instrument] added
// and the busy counter [Busy] added.
func (p *Processor) hooks(o sqsmsg.Observer) {
	for o != nil {
		switch w := o.(type) {
		case *guardedObserver:
			o = w.next
		case *tracedObserver:
			p.tel, o = w.t, w.next
		case *busyObserver:
			p.busy, o = w.add, w.next
		default:
			return
		}
	}
}

// Process runs msg through the path and returns its Result. A message
// received before its not-before time is not run: its outcome is
// OutcomeHold, and the caller holds it (settle.Hold). When the
// handler fails after ctx was cancelled with cause [sqsmsg.ErrShutdown],
// the outcome is OutcomeRelease. A handler that returns nil is acked even
// if ctx was cancelled.
func (p *Processor) Process(ctx context.Context, msg *sqsmsg.Message) sqsmsg.Result {
	// A message not yet due is held, not run: before its body is
	// fetched (a copy sent again carries the pointer, never the body).
	if res, held := p.hold(ctx, msg); held {
		return res
	}
	// The body first: a KeyFunc and the handler see the body as sent.
	// A body that cannot be had is classified as a handler's error
	// would be (the handler does not run).
	if err := p.decode(ctx, msg); err != nil {
		return p.classify(ctx, msg, err)
	}
	p.setKey(msg)
	start := time.Now()
	err := p.run(ctx, msg)
	d := time.Since(start)
	p.observer.HandlerDone(msg, d, err)
	res := p.classify(ctx, msg, err)
	res.Duration = d
	return res
}

// classify turns a handler's error into a Result (without Duration).
func (p *Processor) classify(ctx context.Context, msg *sqsmsg.Message, err error) sqsmsg.Result {
	if err == nil {
		return sqsmsg.Result{Outcome: sqsmsg.OutcomeAck}
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), sqsmsg.ErrShutdown) {
		return sqsmsg.Result{Outcome: sqsmsg.OutcomeRelease, Err: err}
	}
	v, ok := sqsmsg.Verdict{}, false
	var pe *sqsmsg.PanicError
	if p.classifier != nil {
		v, ok, pe = p.askClassifier(ctx, msg, err)
		if ok && (v.Outcome < sqsmsg.OutcomeAck || v.Outcome > sqsmsg.OutcomeRelease) {
			ok = false
		}
	}
	switch {
	case pe != nil:
		// A transient failure, as a handler's panic is.
		v = defaultVerdict(p.backoff, p.maxAttempts, msg, pe)
	case !ok:
		v = defaultVerdict(p.backoff, p.maxAttempts, msg, err)
	}
	rateLimited := false
	if v.Outcome == sqsmsg.OutcomeRetry && v.Class == sqsmsg.ClassRateLimited {
		v.Class, rateLimited = sqsmsg.ClassUnavailable, true
	}
	res := sqsmsg.Result{Outcome: v.Outcome, Delay: v.Delay, Err: err, Class: v.Class}
	if v.Outcome == sqsmsg.OutcomeRetry && v.Class == sqsmsg.ClassUnavailable {
		// The downstream's Retry-After, if it gave one; the pause if not.
		res.RetryAfter = max(v.Delay, 0)
		res.Delay = cmp.Or(res.RetryAfter, p.pause)
		if ue, ok := errors.AsType[*sqsmsg.UnavailableError](err); ok && ue.RateLimited {
			rateLimited = true
		}
		res.RateLimited = rateLimited
	}
	if v.Outcome == sqsmsg.OutcomeDeadLetter {
		if res.Class == "" {
			res.Class = sqsmsg.ClassPermanent
		}
		res.Reason = HandlerText(err)
		if res.Class == sqsmsg.ClassMaxAttempts {
			res.Reason = fmt.Sprintf("max attempts (%d): %s", msg.Attempt(), res.Reason)
		}
	}
	return res
}

// askClassifier asks the Classifier; a panic in it is recovered, logged
// and returned.
func (p *Processor) askClassifier(ctx context.Context, msg *sqsmsg.Message, err error) (v sqsmsg.Verdict, ok bool, pe *sqsmsg.PanicError) {
	defer func() {
		if r := recover(); r != nil {
			pe = &sqsmsg.PanicError{Value: r, Stack: debug.Stack()}
			p.logger.Error("Classifier panicked; recovered: the failure counts as transient",
				zap.String("message_id", msg.ID),
				zap.String("key", msg.Key()),
				zap.String("panic", fmt.Sprint(r)),
				zap.ByteString("stack", pe.Stack))
		}
	}()
	v, ok = p.classifier.Classify(ctx, msg, err)
	return v, ok, nil
}

// run starts the message's span, counts the handler as running, builds
// the middleware chain around the handler and runs it, with panic
// recovery around all: a Middleware constructor is user code too. (The
// span and the count are where an outermost middleware would put them.)
func (p *Processor) run(ctx context.Context, msg *sqsmsg.Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &sqsmsg.PanicError{Value: v, Stack: debug.Stack()}
			p.logger.Error("handler panicked",
				zap.String("message_id", msg.ID),
				zap.String("key", msg.Key()),
				zap.String("panic", fmt.Sprint(v)),
				zap.ByteString("stack", pe.Stack))
			err = pe
		}
	}()
	if p.tel != nil {
		ctx = p.tel.Start(ctx, msg, msg.QueueURL, msg.Attributes, msg.SystemAttributes, msg.ID, msg.Key(), msg.ReceiveCount)
	}
	if p.busy != nil {
		p.busy(1)
		defer p.busy(-1)
	}
	return sqsmsg.Chain(p.handler, p.middleware...).Handle(ctx, msg)
}

func (p *Processor) setKey(msg *sqsmsg.Message) {
	if p.keyFunc == nil {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			p.logger.Error("KeyFunc panicked; using the default key",
				zap.String("message_id", msg.ID), zap.String("panic", fmt.Sprint(v)))
			delivery.SetKey(msg, "")
		}
	}()
	delivery.SetKey(msg, p.keyFunc(msg))
}

// SettledMessage is the message of the debug-level line logged once per
// settled message (consumer.SettledMessage).
const SettledMessage = "settled"

// LogSettled writes the one debug-level line logged per settled message,
// as consumer.Config.Logger describes it. It never logs the body.
func LogSettled(logger *zap.Logger, msg *sqsmsg.Message, res sqsmsg.Result) {
	if logger == nil {
		return
	}
	ce := logger.Check(zapcore.DebugLevel, SettledMessage)
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 8)
	fields = append(fields,
		zap.String("message_id", msg.ID),
		zap.String("key", msg.Key()),
		zap.String("outcome", res.Outcome.String()),
		zap.Int("receive_count", msg.ReceiveCount),
		zap.Duration("duration", res.Duration))
	if res.Outcome == sqsmsg.OutcomeRetry || res.Outcome == sqsmsg.OutcomeHold {
		fields = append(fields, zap.Duration("delay", res.Delay))
	}
	if res.Outcome == sqsmsg.OutcomeHold {
		fields = append(fields, zap.Time("not_before", res.NotBefore), zap.Bool("resent", res.Resent))
	}
	if res.Class != "" {
		fields = append(fields, zap.String("class", res.Class))
	}
	if res.Err != nil {
		fields = append(fields, zap.String("error", HandlerText(res.Err)))
	}
	ce.Write(fields...)
}
