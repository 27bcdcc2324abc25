package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/internal/payload"
	"github.com/sqsonce/sqsonce/internal/pipeline"
)

// The per-message path is shared by the long-poll [Consumer], the Lambda
// adapter and consumertest, yet none of it is for users to call: it stays
// unexported here and is lent to those sibling packages through
// internal/pipeline (whose doc says why it cannot simply live there).
func init() {
	pipeline.Register(pipeline.Funcs[Config, *Message, Result]{
		New:        func(cfg Config) func(context.Context, *Message) Result { return newProcessor(cfg).process },
		LogSettled: logSettled,
		Instrument: instrument,
		Guard:      guard,
	})
}

// processor is the per-message path configured from a [Config]: it sets
// the message's key, runs the middleware and handler with panic recovery,
// and classifies the result. It does not settle the message: the caller
// deletes, retries, dead-letters or releases it as [Result.Outcome] says.
type processor struct {
	handler     Handler
	middleware  []Middleware
	classifier  Classifier
	backoff     Backoff
	maxAttempts int
	keyFunc     KeyFunc
	logger      *zap.Logger
	observer    Observer
	payload     payload.Decoder
}

// newProcessor configures the path from cfg's Handler, Middleware,
// Classifier, Backoff, MaxAttempts, KeyFunc, Logger and Observer; a nil
// Logger or Observer does nothing, and without a Handler every message
// fails.
func newProcessor(cfg Config) *processor {
	p := &processor{
		handler:     cfg.Handler,
		middleware:  cfg.Middleware,
		classifier:  cfg.Classifier,
		backoff:     cfg.Backoff,
		maxAttempts: cfg.MaxAttempts,
		keyFunc:     cfg.KeyFunc,
		logger:      cfg.Logger,
		observer:    cfg.Observer,
		payload:     cfg.Payload.decoder(": set Payload.S3Client (an *s3.Client) in the consumer's or Lambda adapter's Config"),
	}
	if p.handler == nil {
		p.handler = HandlerFunc(func(context.Context, *Message) error { return errors.New("consumer: no handler") })
	}
	if p.logger == nil {
		p.logger = zap.NewNop()
	}
	p.observer = guardObserver(p.observer, p.logger)
	return p
}

// Result is what processing one message decided.
type Result struct {
	// Outcome is how the message must be settled.
	Outcome Outcome
	// Delay is the visibility timeout to set for OutcomeRetry; for
	// OutcomeRelease, the one the consumer set (0, or an earlier retried
	// message's delay for a FIFO group's later messages).
	Delay time.Duration
	// Err is the handler's error (nil for a plain ack).
	Err error
	// Class is the failure class: for OutcomeDeadLetter the class recorded
	// in the dead letter ("permanent", "max_attempts", "key_reuse", ...);
	// for a retried panic "panic"; otherwise empty.
	Class string
	// Reason is the text recorded as the Error of the dead letter's
	// [deadletter.Failure]: the handler's error text, without the
	// "permanent: " or "retry after" prefix of [Permanent] and
	// [RetryAfter] (the class says it).
	Reason string
	// Duration is how long the middleware chain and handler ran.
	Duration time.Duration
}

// process runs msg through the path and returns its Result. When the
// handler fails after ctx was cancelled with cause [ErrShutdown], the
// outcome is OutcomeRelease. A handler that returns nil is acked even if
// ctx was cancelled.
func (p *processor) process(ctx context.Context, msg *Message) Result {
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
func (p *processor) classify(ctx context.Context, msg *Message, err error) Result {
	if err == nil {
		return Result{Outcome: OutcomeAck}
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
		return Result{Outcome: OutcomeRelease, Err: err}
	}
	v, ok := Verdict{}, false
	var pe *PanicError
	if p.classifier != nil {
		v, ok, pe = p.askClassifier(ctx, msg, err)
		if ok && (v.Outcome < OutcomeAck || v.Outcome > OutcomeRelease) {
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
	res := Result{Outcome: v.Outcome, Delay: v.Delay, Err: err, Class: v.Class}
	if v.Outcome == OutcomeDeadLetter {
		if res.Class == "" {
			res.Class = ClassPermanent
		}
		res.Reason = handlerText(err)
		if res.Class == ClassMaxAttempts {
			res.Reason = fmt.Sprintf("max attempts (%d): %s", msg.Attempt(), res.Reason)
		}
	}
	return res
}

// askClassifier asks the Classifier; a panic in it is recovered, logged
// and returned.
func (p *processor) askClassifier(ctx context.Context, msg *Message, err error) (v Verdict, ok bool, pe *PanicError) {
	defer func() {
		if r := recover(); r != nil {
			pe = &PanicError{Value: r, Stack: debug.Stack()}
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

// run builds the middleware chain around the handler and runs it, with
// panic recovery around both: a Middleware constructor is user code too.
func (p *processor) run(ctx context.Context, msg *Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			p.logger.Error("handler panicked",
				zap.String("message_id", msg.ID),
				zap.String("key", msg.Key()),
				zap.String("panic", fmt.Sprint(v)),
				zap.ByteString("stack", pe.Stack))
			err = pe
		}
	}()
	return Chain(p.handler, p.middleware...).Handle(ctx, msg)
}

func (p *processor) setKey(msg *Message) {
	if p.keyFunc == nil {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			p.logger.Error("KeyFunc panicked; using the default key",
				zap.String("message_id", msg.ID), zap.String("panic", fmt.Sprint(v)))
			msg.SetKey("")
		}
	}()
	msg.SetKey(p.keyFunc(msg))
}

// SettledMessage is the message of the debug-level line logged once per
// settled message (see [Config.Logger]), for finding those lines.
const SettledMessage = "settled"

// logSettled writes the one debug-level line logged per settled message,
// as [Config.Logger] describes it. It never logs the body.
func logSettled(logger *zap.Logger, msg *Message, res Result) {
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
	if res.Outcome == OutcomeRetry {
		fields = append(fields, zap.Duration("delay", res.Delay))
	}
	if res.Class != "" {
		fields = append(fields, zap.String("class", res.Class))
	}
	if res.Err != nil {
		fields = append(fields, zap.String("error", handlerText(res.Err)))
	}
	ce.Write(fields...)
}

// LoggerConfig is zap.NewProductionConfig (JSON to stderr) at the given
// level and without sampling, so every "settled" line is kept. Change its
// outputs or encoder as you like; keep Sampling nil.
func LoggerConfig(level zapcore.Level) zap.Config {
	cfg := zap.NewProductionConfig()
	cfg.Sampling = nil
	cfg.Level = zap.NewAtomicLevelAt(level)
	return cfg
}

// NewLogger builds [LoggerConfig] (a JSON logger like zap.NewProduction
// but without sampling) at the given level; use zapcore.DebugLevel to see
// one line per settled message.
func NewLogger(level zapcore.Level) (*zap.Logger, error) {
	l, err := LoggerConfig(level).Build()
	if err != nil {
		return nil, fmt.Errorf("consumer: build logger: %w", err)
	}
	return l, nil
}
