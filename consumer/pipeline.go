package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Pipeline is the per-message path shared by the long-poll [Consumer], the
// Lambda adapter and consumertest: it sets the message's key, runs the
// middleware and handler with panic recovery, and classifies the result.
// It does not settle the message: the caller deletes, retries,
// dead-letters or releases it as [Result.Outcome] says. The zero value of
// every field but Handler is usable.
type Pipeline struct {
	// Handler handles the message. Required.
	Handler Handler
	// Middleware wraps Handler, the first outermost. Panic recovery always
	// wraps the whole chain.
	Middleware []Middleware
	// Classifier is asked first; when it has no opinion (or returns an
	// invalid Outcome) the consumer's classification (see
	// [Config.Classifier]) decides. Defaults to nil: the default classifier alone.
	Classifier Classifier
	// Backoff is the retry policy for transient failures. Defaults to
	// Backoff{} (1s base, 15m cap, full jitter).
	Backoff Backoff
	// MaxAttempts dead-letters a message (class "max_attempts") when a
	// transient failure happens on its MaxAttempts-th receive. Defaults to 0:
	// no limit.
	MaxAttempts int
	// KeyFunc sets the message's dedupe key before the middleware runs.
	// Defaults to nil: [DefaultKey].
	KeyFunc KeyFunc
	// Logger logs panics (error level, with the stack). Defaults to a no-op
	// logger.
	Logger *zap.Logger
	// Observer gets HandlerDone. Defaults to [NopObserver].
	Observer Observer
}

// Result is what processing one message decided.
type Result struct {
	// Outcome is how the message must be settled.
	Outcome Outcome
	// Delay is the visibility timeout to set for OutcomeRetry.
	Delay time.Duration
	// Err is the handler's error (nil for a plain ack).
	Err error
	// Class is the failure class: for OutcomeDeadLetter the class recorded
	// in the dead letter ("permanent", "max_attempts", "key_reuse", ...);
	// for a retried panic "panic"; otherwise empty.
	Class string
	// Reason is the text recorded as [Failure.Error] in a dead letter: the
	// handler's error text, without the "permanent: " or "retry after"
	// prefix of [Permanent] and [RetryAfter] (the class says it).
	Reason string
	// Duration is how long the middleware chain and handler ran.
	Duration time.Duration
}

// Process runs the message through the pipeline and returns its Result.
// When the handler fails after ctx was cancelled with cause [ErrShutdown],
// the outcome is OutcomeRelease. A handler that returns nil is acked even
// if ctx was cancelled.
func (p *Pipeline) Process(ctx context.Context, msg *Message) Result {
	p.setKey(msg)
	h := p.Handler
	if h == nil {
		h = HandlerFunc(func(context.Context, *Message) error { return errors.New("consumer: no handler") })
	}
	h = Chain(h, p.Middleware...)
	start := time.Now()
	err := p.run(ctx, h, msg)
	d := time.Since(start)
	p.observer().HandlerDone(msg, d, err)
	res := p.Classify(ctx, msg, err)
	res.Duration = d
	return res
}

// Classify turns a handler's error into a Result (without Duration). It is
// what Process does after the handler returns.
func (p *Pipeline) Classify(ctx context.Context, msg *Message, err error) Result {
	if err == nil {
		return Result{Outcome: OutcomeAck}
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
		return Result{Outcome: OutcomeRelease, Err: err}
	}
	v, ok := Verdict{}, false
	if p.Classifier != nil {
		v, ok = p.Classifier.Classify(ctx, msg, err)
		if ok && (v.Outcome < OutcomeAck || v.Outcome > OutcomeRelease) {
			ok = false
		}
	}
	if !ok {
		v = defaultVerdict(p.Backoff, p.MaxAttempts, msg, err)
	}
	res := Result{Outcome: v.Outcome, Delay: v.Delay, Err: err, Class: v.Class}
	if v.Outcome == OutcomeDeadLetter {
		if res.Class == "" {
			res.Class = ClassPermanent
		}
		res.Reason = handlerText(err)
		if res.Class == ClassMaxAttempts {
			res.Reason = fmt.Sprintf("max attempts (%d): %s", max(msg.ReceiveCount, 1), res.Reason)
		}
	}
	return res
}

func (p *Pipeline) run(ctx context.Context, h Handler, msg *Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			p.logger().Error("handler panicked",
				zap.String("message_id", msg.ID),
				zap.String("key", msg.Key()),
				zap.String("panic", fmt.Sprint(v)),
				zap.ByteString("stack", pe.Stack))
			err = pe
		}
	}()
	return h.Handle(ctx, msg)
}

func (p *Pipeline) setKey(msg *Message) {
	if p.KeyFunc == nil {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			p.logger().Error("KeyFunc panicked; using the default key",
				zap.String("message_id", msg.ID), zap.String("panic", fmt.Sprint(v)))
			msg.SetKey("")
		}
	}()
	msg.SetKey(p.KeyFunc(msg))
}

func (p *Pipeline) logger() *zap.Logger {
	if p.Logger == nil {
		return zap.NewNop()
	}
	return p.Logger
}

func (p *Pipeline) observer() Observer {
	if p.Observer == nil {
		return NopObserver{}
	}
	return p.Observer
}

// SettledMessage is the log message of the line [LogSettled] writes.
const SettledMessage = "settled"

// LogSettled writes the one debug-level line logged per settled message:
// message "settled" with fields message_id (the SQS MessageId), key (the
// dedupe key, without namespace), outcome (ack, duplicate, retry,
// dead_letter or release), receive_count (an integer) and duration (the
// handler's run time), plus delay, class and error when they apply (the
// error's text without the prefix of [Permanent] or [RetryAfter], which
// the class or delay already says). It never logs the body.
//
// zap's sampling (zap.NewProduction samples by level and message) would
// drop most of these lines under load: give the consumer a logger built
// without sampling, such as [NewLogger].
func LogSettled(logger *zap.Logger, msg *Message, res Result) {
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
