package outbox

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqsonce/sqsonce/internal/telemetry"
)

// meteredObserver feeds the relay's metrics, then calls next.
type meteredObserver struct {
	next                    Observer
	published, failed, dead metric.Int64Counter
	pending, deadNow        metric.Int64Gauge
	oldestAge               metric.Float64Gauge
}

// instrument wraps cfg.Observer with the relay's metrics when a
// MeterProvider is set; with none cfg is unchanged.
func instrument(cfg RelayConfig) RelayConfig {
	if cfg.MeterProvider == nil {
		return cfg
	}
	m := cfg.MeterProvider.Meter(telemetry.ScopeName)
	o := &meteredObserver{next: cfg.Observer}
	o.published, _ = m.Int64Counter("sqsonce.outbox.published", metric.WithDescription("Events the relay published to SQS."), metric.WithUnit("{event}"))
	o.failed, _ = m.Int64Counter("sqsonce.outbox.send_failures", metric.WithDescription("Failed sends of events (each is retried until parked)."), metric.WithUnit("{event}"))
	o.dead, _ = m.Int64Counter("sqsonce.outbox.dead", metric.WithDescription("Events parked as dead after MaxAttempts failed sends."), metric.WithUnit("{event}"))
	o.pending, _ = m.Int64Gauge("sqsonce.outbox.pending", metric.WithDescription("Events waiting to be published, dead ones excluded."), metric.WithUnit("{event}"))
	o.deadNow, _ = m.Int64Gauge("sqsonce.outbox.dead_events", metric.WithDescription("Events parked as dead now, waiting for Requeue."), metric.WithUnit("{event}"))
	o.oldestAge, _ = m.Float64Gauge("sqsonce.outbox.oldest_pending_age", metric.WithDescription("Age of the oldest pending event."), metric.WithUnit("s"))
	cfg.Observer = o
	return cfg
}

func (o *meteredObserver) Published(evs []Event) {
	o.published.Add(context.Background(), int64(len(evs)))
	o.next.Published(evs)
}

func (o *meteredObserver) SendFailed(ev Event, err error, dead bool) {
	o.failed.Add(context.Background(), 1)
	if dead {
		o.dead.Add(context.Background(), 1)
	}
	o.next.SendFailed(ev, err, dead)
}

func (o *meteredObserver) Stats(s Stats, oldestAge time.Duration) {
	ctx := context.Background()
	o.pending.Record(ctx, int64(s.Pending))
	o.deadNow.Record(ctx, int64(s.Dead))
	o.oldestAge.Record(ctx, oldestAge.Seconds())
	o.next.Stats(s, oldestAge)
}
