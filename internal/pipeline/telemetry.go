package pipeline

import (
	"context"
	"time"

	"github.com/sqsonce/sqsonce/internal/telemetry"
	"github.com/sqsonce/sqsonce/sqsmsg"
)

// Instrument returns cfg with the OpenTelemetry instrumentation of the
// path (the instruments are in internal/telemetry): a process span per
// message, started by the [Processor] that [New] builds from the result
// just before cfg.Middleware (where an outermost middleware would), and
// the metrics, fed by a wrapper of cfg.Observer that also ends the spans.
// The span's start is found in that wrapper, so a runtime must pass the
// Observer on (it may [Guard] it), not replace it.
// With a nil t (neither provider set) it returns cfg unchanged, so
// telemetry off costs nothing.
//
// It is the one adapter from the path's events to OpenTelemetry, for
// the consumer and the Lambda adapter alike, so a metric or span
// attribute is defined once. (The consumer also counts and times its SQS
// calls with t.)
func Instrument(cfg Config, t *telemetry.Consumer) Config {
	if t == nil {
		return cfg
	}
	next := cfg.Observer
	if next == nil {
		next = sqsmsg.NopObserver{}
	}
	cfg.Observer = &tracedObserver{next: next, t: t}
	return cfg
}

// Busy returns o (nil is [sqsmsg.NopObserver]) wrapped so that the
// [Processor] that [New] builds with it calls add(1) just before each
// message's middleware and handler run (after its span starts, see
// [Instrument]) and add(-1) when they have returned or panicked: the
// count of running handlers, without a middleware built per message.
func Busy(o sqsmsg.Observer, add func(delta int)) sqsmsg.Observer {
	if o == nil {
		o = sqsmsg.NopObserver{}
	}
	return &busyObserver{Observer: o, next: o, add: add}
}

// busyObserver carries Busy's add to New; it calls next for everything.
type busyObserver struct {
	sqsmsg.Observer
	next sqsmsg.Observer
	add  func(delta int)
}

func (o *busyObserver) Paused(p sqsmsg.Pause)   { Paused(o.next, p) }
func (o *busyObserver) Resumed(d time.Duration) { Resumed(o.next, d) }

// tracedObserver feeds the metrics and ends the spans, then calls next.
type tracedObserver struct {
	next sqsmsg.Observer
	t    *telemetry.Consumer
}

func (o *tracedObserver) Received(msg *sqsmsg.Message) {
	o.t.Received(context.Background())
	o.next.Received(msg)
}

func (o *tracedObserver) HandlerDone(msg *sqsmsg.Message, d time.Duration, err error) {
	o.t.HandlerDone(context.Background(), d)
	o.next.HandlerDone(msg, d, err)
}

func (o *tracedObserver) Settled(msg *sqsmsg.Message, res sqsmsg.Result) {
	o.t.Settled(context.Background(), msg, res.Outcome.String(), res.Class, res.Err)
	// The held messages and the next one due (DefaultKey: the KeyFunc
	// has not run on a held message).
	switch _, marked := msg.Attributes[sqsmsg.AttrNotBefore]; {
	case res.Outcome == sqsmsg.OutcomeHold:
		how := "visibility"
		if res.Resent {
			how = "resend"
		}
		o.t.Held(context.Background(), sqsmsg.DefaultKey(msg), how, res.NotBefore)
	case marked:
		o.t.HeldRan(context.Background(), sqsmsg.DefaultKey(msg))
	}
	o.next.Settled(msg, res)
}

func (o *tracedObserver) HeartbeatFailed(n int, err error) {
	o.t.HeartbeatFailed(context.Background(), n)
	o.next.HeartbeatFailed(n, err)
}

func (o *tracedObserver) LeaseLost(msg *sqsmsg.Message, err error) {
	o.t.LeaseLost(context.Background(), msg, err)
	o.next.LeaseLost(msg, err)
}

func (o *tracedObserver) DeadLettered(msg *sqsmsg.Message, err error) {
	result := "sent"
	if err != nil {
		result = "failed"
	}
	o.t.DeadLettered(context.Background(), msg, result, err)
	o.next.DeadLettered(msg, err)
}

func (o *tracedObserver) DeadLetterRefused(msg *sqsmsg.Message, err error) {
	o.t.DeadLettered(context.Background(), msg, "refused", err)
	o.next.DeadLetterRefused(msg, err)
}

func (o *tracedObserver) SettleFailed(msg *sqsmsg.Message, op string, err error) {
	o.t.SettleFailed(context.Background(), op)
	o.next.SettleFailed(msg, op, err)
}

// ReceiveFailed passes the failure on: the metrics counted it already,
// as a failed ReceiveMessage call (the consumer's traced client).
func (o *tracedObserver) ReceiveFailed(err error) { o.next.ReceiveFailed(err) }

func (o *tracedObserver) Paused(p sqsmsg.Pause) {
	o.t.Paused(context.Background(), p.Reason, p.Count == 1)
	Paused(o.next, p)
}

func (o *tracedObserver) Resumed(d time.Duration) {
	o.t.Resumed(context.Background(), d)
	Resumed(o.next, d)
}
