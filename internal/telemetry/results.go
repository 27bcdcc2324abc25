package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Results counts events by one attribute whose values are known in
// advance (an outcome, a result): their attribute sets are built once, so
// counting allocates nothing. A nil *Results does nothing.
type Results struct {
	counter metric.Int64Counter
	key     string
	opts    map[string]metric.AddOption
}

// NewResults returns the counter name of mp's sqsonce meter, with key
// taking one of values; nil when mp is nil (telemetry off).
func NewResults(mp metric.MeterProvider, name, description, unit, key string, values ...string) *Results {
	if mp == nil {
		return nil
	}
	c, _ := mp.Meter(ScopeName).Int64Counter(name, metric.WithDescription(description), metric.WithUnit(unit))
	r := &Results{counter: c, key: key, opts: make(map[string]metric.AddOption, len(values))}
	for _, v := range values {
		r.opts[v] = metric.WithAttributeSet(attribute.NewSet(attribute.String(key, v)))
	}
	return r
}

// Add counts n events with the given value.
func (r *Results) Add(ctx context.Context, value string, n int64) {
	if r == nil {
		return
	}
	opt, ok := r.opts[value]
	if !ok { // not listed at creation: built on the fly
		opt = metric.WithAttributes(attribute.String(r.key, value))
	}
	r.counter.Add(ctx, n, opt)
}
