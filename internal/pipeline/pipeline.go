// Package pipeline lends package consumer's per-message path to the
// packages built on it, the Lambda adapter (sqslambda) and consumertest,
// without making that path part of consumer's public API.
//
// The path cannot move into this package: it works on consumer's own
// types (Message, Handler, Classifier, Result, ...), and consumer runs
// it, so this package would have to import consumer and consumer import
// it back. Instead consumer keeps the path unexported and, in an init
// function, registers it here as a [Funcs] over its own types; a sibling
// takes the same Funcs back with [Get], naming those types:
//
//	var lent = pipeline.Get[consumer.Config, *consumer.Message, consumer.Result]()
//
// Go initializes an imported package before the package that imports it,
// so consumer has registered before any sibling can ask. Both sides are
// type-checked against Funcs; the one check left to run time, in Get, is
// that both named the same three types, and it fails when the sibling
// package is initialized, so in every one of its tests.
package pipeline

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// Funcs is what package consumer lends: Config is consumer.Config,
// Message *consumer.Message and Result consumer.Result.
type Funcs[Config, Message, Result any] struct {
	// New returns the per-message path configured as a consumer with cfg
	// would be (Handler, Middleware, Classifier, Backoff, MaxAttempts,
	// KeyFunc, Logger, Observer and Payload; the other fields are ignored). The
	// path sets the message's key, runs the middleware and handler with
	// panic recovery, reports HandlerDone to the Observer and classifies
	// the handler's error. It does not settle the message: the caller
	// does what the Result's Outcome says.
	New func(cfg Config) func(ctx context.Context, msg Message) Result
	// LogSettled writes the debug line logged once per settled message.
	LogSettled func(logger *zap.Logger, msg Message, res Result)
	// Instrument returns cfg with the OpenTelemetry instrumentation added
	// when cfg.TracerProvider or cfg.MeterProvider is set: a process span
	// per message (a middleware put first), metrics fed by a wrapper of
	// cfg.Observer (which also ends the spans), and, when cfg.Client is
	// set, every SQS call counted and timed. queueURL names the queue in
	// the metrics' attributes ("" leaves it out). With neither provider
	// set it returns cfg unchanged.
	Instrument func(cfg Config, queueURL string) Config
	// Guard returns cfg with its Observer wrapped so that a panic in any
	// of its methods is recovered and logged (with cfg.Logger, at error
	// level, with the stack) and that call skipped: a runtime that calls
	// the Observer itself guards it first, after Instrument, and passes
	// the result to New, which then does not wrap it again. (New always
	// guards the Observer of its path, and recovers the Classifier, the
	// Middleware constructors and KeyFunc.)
	Guard func(cfg Config) Config
}

// lent holds the Funcs package consumer registered.
var lent any

// Register stores f. Package consumer calls it once, in an init function.
func Register[Config, Message, Result any](f Funcs[Config, Message, Result]) {
	lent = f
}

// Get returns the Funcs package consumer registered. It panics when they
// were registered over other types than the ones named.
func Get[Config, Message, Result any]() Funcs[Config, Message, Result] {
	f, ok := lent.(Funcs[Config, Message, Result])
	if !ok {
		panic(fmt.Sprintf("pipeline: package consumer registered %T, not %T", lent, f))
	}
	return f
}
