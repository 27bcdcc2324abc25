package telemetry

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Backlog is one reading of a queue's approximate message counts.
type Backlog struct {
	// Visible is ApproximateNumberOfMessages: waiting to be received.
	Visible int64
	// InFlight is ApproximateNumberOfMessagesNotVisible: received and not
	// yet deleted, or waiting out a retry delay.
	InFlight int64
	// Delayed is ApproximateNumberOfMessagesDelayed: sent with a delay
	// that has not passed.
	Delayed int64
}

// Load exports a consumer's autoscaling signal as observable gauges: the
// backlog of its queue as last sampled (sqsonce.consumer.queue.backlog,
// one point per sqsonce.message.state), its capacity
// (sqsonce.consumer.capacity) and the share of it that was busy over the
// last sampling interval (sqsonce.consumer.utilization), each with
// messaging.system and messaging.destination.name. A value is reported
// only once set, the backlog only while the last read succeeded, and
// nothing after Close. A nil *Load does nothing.
type Load struct {
	reg metric.Registration

	mu          sync.Mutex
	backlog     Backlog
	haveBacklog bool
	util        float64
	haveUtil    bool
}

// NewLoad returns the gauges of a consumer of queueURL that runs up to
// capacity handlers at once, or nil when mp is nil.
func NewLoad(mp metric.MeterProvider, queueURL string, capacity int) *Load {
	if mp == nil {
		return nil
	}
	l := &Load{}
	m := mp.Meter(ScopeName)
	system := systemAttrs(queueURL)
	base := metric.WithAttributeSet(attribute.NewSet(system...))
	state := func(s string) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue{}, system...), attribute.String("sqsonce.message.state", s))...))
	}
	visible, inFlight, delayed := state("visible"), state("in_flight"), state("delayed")
	backlog, _ := m.Int64ObservableGauge("sqsonce.consumer.queue.backlog",
		metric.WithDescription("Messages in the queue by state (visible, in_flight, delayed), as last read with GetQueueAttributes."),
		metric.WithUnit("{message}"))
	util, _ := m.Float64ObservableGauge("sqsonce.consumer.utilization",
		metric.WithDescription("Share of the consumer's capacity its handlers were busy over the last sampling interval."),
		metric.WithUnit("1"))
	capG, _ := m.Int64ObservableGauge("sqsonce.consumer.capacity",
		metric.WithDescription("Handlers the consumer runs at once (its Concurrency)."),
		metric.WithUnit("{handler}"))
	l.reg, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		o.ObserveInt64(capG, int64(capacity), base)
		if l.haveUtil {
			o.ObserveFloat64(util, l.util, base)
		}
		if l.haveBacklog {
			o.ObserveInt64(backlog, l.backlog.Visible, visible)
			o.ObserveInt64(backlog, l.backlog.InFlight, inFlight)
			o.ObserveInt64(backlog, l.backlog.Delayed, delayed)
		}
		return nil
	}, backlog, util, capG)
	return l
}

// SetBacklog reports b from now on.
func (l *Load) SetBacklog(b Backlog) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.backlog, l.haveBacklog = b, true
	l.mu.Unlock()
}

// ForgetBacklog stops reporting the backlog (its last read failed) until
// the next SetBacklog.
func (l *Load) ForgetBacklog() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.haveBacklog = false
	l.mu.Unlock()
}

// SetUtilization reports u (0 to 1) from now on.
func (l *Load) SetUtilization(u float64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.util, l.haveUtil = u, true
	l.mu.Unlock()
}

// Close stops reporting every gauge.
func (l *Load) Close() {
	if l == nil || l.reg == nil {
		return
	}
	_ = l.reg.Unregister()
}
