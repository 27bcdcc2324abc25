package consumer

import (
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
)

// The user's callbacks (the Observer's methods, the Classifier, the
// Middleware constructors, Message.OnHeartbeat functions, KeyFunc) run on
// the consumer's own goroutines: a panic in one of them must not crash
// the process. Each is called under a recover; the panic is logged at
// error level with its stack, and the consumer goes on as the caller
// documents (an Observer call is skipped, a Classifier panic is a
// transient failure, an OnHeartbeat panic cancels the handler as an error
// would).

// logPanic logs a recovered panic of the user callback named what.
func logPanic(log *zap.Logger, what string, v any, fields ...zap.Field) {
	log.Error(what+" panicked; recovered", append(fields,
		zap.String("panic", fmt.Sprint(v)),
		zap.ByteString("stack", debug.Stack()))...)
}

// guardObserver returns o with every method called under a recover that
// logs the panic to log and skips the call. A nil o is [NopObserver]; an
// already guarded one is returned as it is.
func guardObserver(o Observer, log *zap.Logger) Observer {
	switch o.(type) {
	case nil:
		return NopObserver{}
	case NopObserver, *guardedObserver:
		return o
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &guardedObserver{next: o, log: log}
}

// guard returns cfg with its Observer guarded (see guardObserver).
func guard(cfg Config) Config {
	cfg.Observer = guardObserver(cfg.Observer, cfg.Logger)
	return cfg
}

// guardedObserver calls next, recovering its panics.
type guardedObserver struct {
	next Observer
	log  *zap.Logger
}

// recover is deferred by each method: it recovers a panic of the method
// named method and logs it.
func (g *guardedObserver) recover(method string) {
	if v := recover(); v != nil {
		logPanic(g.log, "Observer."+method, v)
	}
}

func (g *guardedObserver) Received(msg *Message) {
	defer g.recover("Received")
	g.next.Received(msg)
}

func (g *guardedObserver) HandlerDone(msg *Message, d time.Duration, err error) {
	defer g.recover("HandlerDone")
	g.next.HandlerDone(msg, d, err)
}

func (g *guardedObserver) Settled(msg *Message, res Result) {
	defer g.recover("Settled")
	g.next.Settled(msg, res)
}

func (g *guardedObserver) HeartbeatFailed(n int, err error) {
	defer g.recover("HeartbeatFailed")
	g.next.HeartbeatFailed(n, err)
}

func (g *guardedObserver) LeaseLost(msg *Message, err error) {
	defer g.recover("LeaseLost")
	g.next.LeaseLost(msg, err)
}

func (g *guardedObserver) DeadLettered(msg *Message, err error) {
	defer g.recover("DeadLettered")
	g.next.DeadLettered(msg, err)
}

func (g *guardedObserver) DeadLetterRefused(msg *Message, err error) {
	defer g.recover("DeadLetterRefused")
	g.next.DeadLetterRefused(msg, err)
}

func (g *guardedObserver) SettleFailed(msg *Message, op string, err error) {
	defer g.recover("SettleFailed")
	g.next.SettleFailed(msg, op, err)
}

func (g *guardedObserver) ReceiveFailed(err error) {
	defer g.recover("ReceiveFailed")
	g.next.ReceiveFailed(err)
}

func (g *guardedObserver) Paused(p Pause) {
	defer g.recover("Paused")
	paused(g.next, p)
}

func (g *guardedObserver) Resumed(d time.Duration) {
	defer g.recover("Resumed")
	resumed(g.next, d)
}
