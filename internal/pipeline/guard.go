package pipeline

import (
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/sqsmsg"
)

// The user's callbacks (the Observer's methods, the Classifier, the
// Middleware constructors, Message.OnHeartbeat functions, KeyFunc) run on
// the runtime's own goroutines: a panic in one of them must not crash
// the process. Each is called under a recover; the panic is logged at
// error level with its stack, and the consumer goes on as the caller
// documents (an Observer call is skipped, a Classifier panic is a
// transient failure, an OnHeartbeat panic cancels the handler as an error
// would).

// LogPanic logs a recovered panic of the user callback named what.
func LogPanic(log *zap.Logger, what string, v any, fields ...zap.Field) {
	log.Error(what+" panicked; recovered", append(fields,
		zap.String("panic", fmt.Sprint(v)),
		zap.ByteString("stack", debug.Stack()))...)
}

// Guard returns o with every method called under a recover that logs the
// panic to log and skips the call. A nil o is [sqsmsg.NopObserver]; an
// already guarded one is returned as it is. A runtime that calls the
// Observer itself guards it once, after instrumenting it (see
// [Instrument]), and passes the result to [New], which then does not wrap
// it again.
func Guard(o sqsmsg.Observer, log *zap.Logger) sqsmsg.Observer {
	switch o.(type) {
	case nil:
		return sqsmsg.NopObserver{}
	case sqsmsg.NopObserver, *guardedObserver:
		return o
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &guardedObserver{next: o, log: log}
}

// guardedObserver calls next, recovering its panics.
type guardedObserver struct {
	next sqsmsg.Observer
	log  *zap.Logger
}

// recover is deferred by each method: it recovers a panic of the method
// named method and logs it.
func (g *guardedObserver) recover(method string) {
	if v := recover(); v != nil {
		LogPanic(g.log, "Observer."+method, v)
	}
}

func (g *guardedObserver) Received(msg *sqsmsg.Message) {
	defer g.recover("Received")
	g.next.Received(msg)
}

func (g *guardedObserver) HandlerDone(msg *sqsmsg.Message, d time.Duration, err error) {
	defer g.recover("HandlerDone")
	g.next.HandlerDone(msg, d, err)
}

func (g *guardedObserver) Settled(msg *sqsmsg.Message, res sqsmsg.Result) {
	defer g.recover("Settled")
	g.next.Settled(msg, res)
}

func (g *guardedObserver) HeartbeatFailed(n int, err error) {
	defer g.recover("HeartbeatFailed")
	g.next.HeartbeatFailed(n, err)
}

func (g *guardedObserver) LeaseLost(msg *sqsmsg.Message, err error) {
	defer g.recover("LeaseLost")
	g.next.LeaseLost(msg, err)
}

func (g *guardedObserver) DeadLettered(msg *sqsmsg.Message, err error) {
	defer g.recover("DeadLettered")
	g.next.DeadLettered(msg, err)
}

func (g *guardedObserver) DeadLetterRefused(msg *sqsmsg.Message, err error) {
	defer g.recover("DeadLetterRefused")
	g.next.DeadLetterRefused(msg, err)
}

func (g *guardedObserver) SettleFailed(msg *sqsmsg.Message, op string, err error) {
	defer g.recover("SettleFailed")
	g.next.SettleFailed(msg, op, err)
}

func (g *guardedObserver) ReceiveFailed(err error) {
	defer g.recover("ReceiveFailed")
	g.next.ReceiveFailed(err)
}
