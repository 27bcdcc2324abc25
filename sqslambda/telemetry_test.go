package sqslambda_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sqsonce/sqsonce/sqslambda"
)

// The Lambda adapter emits the worker's spans and metrics: one process
// span per record, in the producer's trace when the record carries one,
// and the settled outcomes counted.
func TestTelemetry(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ctx := context.Background()
	defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()

	_, parent := tp.Tracer("test").Start(ctx, "publish")
	parent.End()
	traceparent := "00-" + parent.SpanContext().TraceID().String() + "-" + parent.SpanContext().SpanID().String() + "-01"
	traced := rec(stdARN, "m1", "ack", "")
	traced.MessageAttributes = map[string]events.SQSMessageAttribute{"traceparent": {DataType: "String", StringValue: aws.String(traceparent)}}

	f := newFake()
	h := newHandler(t, f, &scripted{}, func(c *sqslambda.Config) { c.TracerProvider, c.MeterProvider = tp, mp })
	resp, err := h.Handle(context.Background(), f.event(traced, rec(stdARN, "m2", "retry", ""), rec(stdARN, "m3", "perm", "")))
	if err != nil {
		t.Fatal(err)
	}
	if failures(resp) != "m2" {
		t.Fatalf("failures %s", failures(resp))
	}
	var process, inTrace int
	for _, s := range spans.Ended() {
		if strings.HasPrefix(s.Name(), "process ") {
			process++
			if s.SpanContext().TraceID() == parent.SpanContext().TraceID() && s.Parent().SpanID() == parent.SpanContext().SpanID() {
				inTrace++
			}
		}
	}
	if process != 3 || inTrace != 1 {
		t.Fatalf("%d process spans, %d in the producer's trace; want 3 and 1", process, inTrace)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "sqsonce.messages.settled" {
				for _, dp := range sum.DataPoints {
					o, _ := dp.Attributes.Value("sqsonce.outcome")
					got[o.AsString()] += dp.Value
				}
			}
		}
	}
	if len(got) != 3 || got["ack"] != 1 || got["retry"] != 1 || got["dead_letter"] != 1 {
		t.Fatalf("settled metric %v, want one each of ack, retry, dead_letter", got)
	}
}
