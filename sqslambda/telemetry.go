package sqslambda

import (
	"context"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// instrument adds the OpenTelemetry span middleware and metrics observer
// when a provider is set; the consumer does the same for long polling
// (see internal/telemetry).
func instrument(cfg Config) Config {
	t := telemetry.NewConsumer(cfg.TracerProvider, cfg.MeterProvider, "")
	if t == nil {
		return cfg
	}
	trace := func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
			ctx = t.Start(ctx, msg, msg.QueueURL, msg.Attributes, msg.ID, msg.Key(), msg.ReceiveCount)
			return next.Handle(ctx, msg)
		})
	}
	cfg.Middleware = append([]consumer.Middleware{trace}, cfg.Middleware...)
	next := cfg.Observer
	if next == nil {
		next = consumer.NopObserver{}
	}
	cfg.Observer = &tracedObserver{next: next, t: t}
	return cfg
}

type tracedObserver struct {
	next consumer.Observer
	t    *telemetry.Consumer
}

func (o *tracedObserver) Received(msg *consumer.Message) {
	o.t.Received(context.Background())
	o.next.Received(msg)
}

func (o *tracedObserver) HandlerDone(msg *consumer.Message, d time.Duration, err error) {
	o.t.HandlerDone(context.Background(), d)
	o.next.HandlerDone(msg, d, err)
}

func (o *tracedObserver) Settled(msg *consumer.Message, res consumer.Result) {
	o.t.Settled(context.Background(), msg, res.Outcome.String(), res.Class, res.Err)
	o.next.Settled(msg, res)
}

func (o *tracedObserver) HeartbeatFailed(n int, err error) {
	o.t.HeartbeatFailed(context.Background(), n)
	o.next.HeartbeatFailed(n, err)
}

func (o *tracedObserver) LeaseLost(msg *consumer.Message, err error) {
	o.t.LeaseLost(context.Background(), msg, err)
	o.next.LeaseLost(msg, err)
}

func (o *tracedObserver) DeadLettered(msg *consumer.Message, err error) {
	result := "sent"
	if err != nil {
		result = "failed"
	}
	o.t.DeadLettered(context.Background(), msg, result, err)
	o.next.DeadLettered(msg, err)
}

func (o *tracedObserver) DeadLetterRefused(msg *consumer.Message, err error) {
	o.t.DeadLettered(context.Background(), msg, "refused", err)
	o.next.DeadLetterRefused(msg, err)
}

func (o *tracedObserver) SettleFailed(msg *consumer.Message, op string, err error) {
	o.t.SettleFailed(context.Background(), op)
	o.next.SettleFailed(msg, op, err)
}
