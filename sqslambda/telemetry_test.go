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
	"go.opentelemetry.io/otel/trace"

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
		if strings.HasPrefix(s.Name(), "process ") && hasAttr(s, "messaging.message.id") { // not the batch span
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

// xrayHeader builds the AWSTraceHeader an AWS service would set for sc.
func xrayHeader(sc trace.SpanContext) string {
	tid := sc.TraceID().String()
	return "Root=1-" + tid[:8] + "-" + tid[8:] + ";Parent=" + sc.SpanID().String() + ";Sampled=1;Lineage=a87bd80c:1|68fd508a:5"
}

// A batch of records from three traces begun in AWS services (carried in
// attributes.AWSTraceHeader, one record also with a traceparent of a
// fourth trace, which wins): each record's process span continues its
// record's trace, and the invocation's batch span links to every
// record's context.
func TestXRayTraceContinues(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx := context.Background()
	defer func() { _ = tp.Shutdown(ctx) }()

	upstream := map[string]trace.SpanContext{} // record ID → the context it carries
	var recs []events.SQSMessage
	for _, id := range []string{"m1", "m2", "m3"} {
		_, s := tp.Tracer("test").Start(ctx, "api "+id)
		s.End()
		upstream[id] = s.SpanContext()
		r := rec(stdARN, id, "ack", "")
		r.Attributes["AWSTraceHeader"] = xrayHeader(s.SpanContext())
		recs = append(recs, r)
	}
	_, ws := tp.Tracer("test").Start(ctx, "w3c m3")
	ws.End()
	recs[2].MessageAttributes = map[string]events.SQSMessageAttribute{"traceparent": {DataType: "String",
		StringValue: aws.String("00-" + ws.SpanContext().TraceID().String() + "-" + ws.SpanContext().SpanID().String() + "-01")}}
	xray3 := upstream["m3"]
	upstream["m3"] = ws.SpanContext()

	f := newFake()
	h := newHandler(t, f, &scripted{}, func(c *sqslambda.Config) { c.TracerProvider = tp })
	resp, err := h.Handle(ctx, f.event(recs...))
	if err != nil || failures(resp) != "" {
		t.Fatalf("failures %q, err %v", failures(resp), err)
	}
	var process int
	var batch []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() != "process orders" {
			continue
		}
		if s.SpanKind() != trace.SpanKindConsumer {
			t.Fatalf("span %s kind %v, want consumer", s.Name(), s.SpanKind())
		}
		if !hasAttr(s, "messaging.message.id") {
			batch = append(batch, s)
			continue
		}
		process++
		var id string
		for i, sc := range upstream {
			if s.Parent().SpanID() == sc.SpanID() && s.SpanContext().TraceID() == sc.TraceID() {
				id = i
			}
		}
		if id == "" {
			t.Fatalf("process span in trace %s, parent %s: not a record's upstream context", s.SpanContext().TraceID(), s.Parent().SpanID())
		}
		if len(s.Links()) != 1 {
			t.Fatalf("process span with %d links, want 1 to the batch span", len(s.Links()))
		}
	}
	if process != 3 {
		t.Fatalf("%d process spans, want 3", process)
	}
	if len(batch) != 1 {
		t.Fatalf("%d batch spans linking to the records, want 1", len(batch))
	}
	for _, s := range spans.Ended() {
		if hasAttr(s, "messaging.message.id") && s.Links()[0].SpanContext.SpanID() != batch[0].SpanContext().SpanID() {
			t.Fatalf("process span links to %s, not the batch span", s.Links()[0].SpanContext.SpanID())
		}
	}
	linked := map[trace.TraceID]bool{}
	for _, l := range batch[0].Links() {
		linked[l.SpanContext.TraceID()] = true
	}
	for id, sc := range upstream {
		if !linked[sc.TraceID()] {
			t.Fatalf("the batch span does not link to record %s's trace %s", id, sc.TraceID())
		}
	}
	if linked[xray3.TraceID()] {
		t.Fatal("the batch span links to the AWSTraceHeader of a record whose traceparent wins")
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key string) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return true
		}
	}
	return false
}
