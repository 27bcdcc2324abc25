package redrive

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// scopeName is the instrumentation scope of redrive's metrics, the one
// every sqsonce package uses.
const scopeName = "github.com/sqsonce/sqsonce"

// Metric names and attributes (listed in docs/observability.md).
const (
	metricMessages = "sqsonce.redrive.messages"
	metricDuration = "sqsonce.redrive.duration"
	attrResult     = "sqsonce.redrive.result"
	attrOperation  = "sqsonce.redrive.operation"
)

// metrics records what moves, exports and imports did; a nil *metrics
// records nothing.
type metrics struct {
	messages metric.Int64Counter
	duration metric.Float64Histogram
}

// newMetrics returns the instruments of mp, or nil when mp is nil.
func newMetrics(mp metric.MeterProvider) *metrics {
	if mp == nil {
		return nil
	}
	m := mp.Meter(scopeName)
	out := &metrics{}
	out.messages, _ = m.Int64Counter(metricMessages,
		metric.WithDescription("Dead letters handled by redrive, by result: moved (sent, or written by an export), failed (could not be sent; left in the DLQ), refused (no source of the DLQ attested by SQS or a signed record; left), skipped (filtered out, blocked behind its FIFO group, or past Max), came_back (moved by the same run, dead-lettered again; left)."),
		metric.WithUnit("{message}"))
	out.duration, _ = m.Float64Histogram(metricDuration,
		metric.WithDescription("Duration of one redrive run (move, export or import)."),
		metric.WithUnit("s"))
	return out
}

// record adds one run's summary. A dry run records nothing: it changes
// nothing.
func (m *metrics) record(ctx context.Context, operation string, queue Queue, sum Summary) {
	if m == nil || sum.DryRun {
		return
	}
	ctx = context.WithoutCancel(ctx)
	base := []attribute.KeyValue{
		attribute.String("messaging.system", "aws_sqs"),
		attribute.String("messaging.destination.name", queue.Name),
		attribute.String(attrOperation, operation),
	}
	for _, r := range []struct {
		result string
		n      int
	}{{"moved", sum.Moved}, {"failed", sum.Failed}, {"refused", sum.Refused}, {"skipped", sum.Skipped}, {"came_back", sum.CameBack}} {
		if r.n > 0 {
			m.messages.Add(ctx, int64(r.n), metric.WithAttributes(append(base[:len(base):len(base)], attribute.String(attrResult, r.result))...))
		}
	}
	m.duration.Record(ctx, sum.Elapsed.Seconds(), metric.WithAttributes(base...))
}
