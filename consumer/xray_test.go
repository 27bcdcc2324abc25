package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsonce/sqsonce/consumer"
)

// xrayHeader builds the AWSTraceHeader an AWS service would set for the
// span context sc.
func xrayHeader(sc trace.SpanContext) string {
	tid := sc.TraceID().String()
	return "Root=1-" + tid[:8] + "-" + tid[8:] + ";Parent=" + sc.SpanID().String() + ";Sampled=1;Lineage=a87bd80c:1|68fd508a:5"
}

// Four messages sent as AWS services send them, three carrying their
// trace only in the AWSTraceHeader system attribute, the fourth also a
// traceparent of another trace (the local emulator drops AWSTraceHeader,
// so this runs on the fake): each process span continues its message's
// trace, the traceparent winning over AWSTraceHeader, and the receive
// span that brought them links to each message's context rather than
// parenting them.
func TestXRayTraceContinues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		ctx := context.Background()
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		defer func() { _ = tp.Shutdown(ctx) }()

		upstream := map[string]trace.SpanContext{} // body → the context the message carries
		var entries []types.SendMessageBatchRequestEntry
		for _, body := range []string{"a", "b", "c"} {
			_, s := tp.Tracer("test").Start(ctx, "lambda "+body)
			s.End()
			upstream[body] = s.SpanContext()
			entries = append(entries, types.SendMessageBatchRequestEntry{
				Id: aws.String(body), MessageBody: aws.String(body),
				MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
					"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(xrayHeader(s.SpanContext()))},
				},
			})
		}
		_, xs := tp.Tracer("test").Start(ctx, "xray w")
		xs.End()
		_, ws := tp.Tracer("test").Start(ctx, "w3c w")
		ws.End()
		upstream["w"] = ws.SpanContext()
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id: aws.String("w"), MessageBody: aws.String("w"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"traceparent": {DataType: aws.String("String"), StringValue: aws.String("00-" + ws.SpanContext().TraceID().String() + "-" + ws.SpanContext().SpanID().String() + "-01")},
			},
			MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
				"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(xrayHeader(xs.SpanContext()))},
			},
		})
		out, err := f.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("send: %v %+v", err, out)
		}

		var handled atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 4, TracerProvider: tp,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				handled.Add(1)
				return nil
			}),
		})
		if !waitUntil(time.Minute, func() bool { return handled.Load() == 4 }) {
			t.Fatalf("%d handled, want 4", handled.Load())
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		checkProblems(t, f)

		processed := map[string]bool{}
		linked := map[trace.TraceID]bool{}
		for _, s := range spans.Ended() {
			switch s.Name() {
			case "process orders":
				var body string
				for b, sc := range upstream {
					if s.Parent().SpanID() == sc.SpanID() {
						body = b
					}
				}
				if body == "" || s.SpanContext().TraceID() != upstream[body].TraceID() {
					t.Fatalf("process span in trace %s, parent %s: not a message's upstream context", s.SpanContext().TraceID(), s.Parent().SpanID())
				}
				processed[body] = true
			case "receive orders":
				if s.SpanKind() != trace.SpanKindClient {
					t.Fatalf("receive span kind %v, want client", s.SpanKind())
				}
				for _, l := range s.Links() {
					linked[l.SpanContext.TraceID()] = true
					if !hasAttr(l.Attributes, "messaging.message.id") {
						t.Fatalf("link to %s without messaging.message.id", l.SpanContext.TraceID())
					}
				}
			}
		}
		if len(processed) != 4 {
			t.Fatalf("process spans continued the traces of %v, want a, b, c and w", processed)
		}
		for b, sc := range upstream {
			if !linked[sc.TraceID()] {
				t.Fatalf("no receive span links to message %s's trace %s (links to %v)", b, sc.TraceID(), linked)
			}
		}
		if linked[xs.SpanContext().TraceID()] {
			t.Fatal("a receive span links to the AWSTraceHeader of a message whose traceparent wins")
		}
	})
}

func hasAttr(kvs []attribute.KeyValue, key string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return true
		}
	}
	return false
}

// Messages of three traces received together: a receive span links to
// each message's context, with its message ID, and records the batch's
// size; the process spans are children of the messages' contexts.
func TestReceiveSpanLinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		ctx := context.Background()
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		defer func() { _ = tp.Shutdown(ctx) }()

		traces := map[trace.TraceID]bool{}
		var entries []types.SendMessageBatchRequestEntry
		for _, id := range []string{"a", "b", "c"} {
			_, s := tp.Tracer("test").Start(ctx, "checkout "+id)
			s.End()
			traces[s.SpanContext().TraceID()] = true
			entries = append(entries, types.SendMessageBatchRequestEntry{
				Id: aws.String(id), MessageBody: aws.String(id),
				MessageAttributes: map[string]types.MessageAttributeValue{
					"traceparent": {DataType: aws.String("String"), StringValue: aws.String("00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01")},
				},
			})
		}
		if out, err := f.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q), Entries: entries}); err != nil || len(out.Failed) > 0 {
			t.Fatalf("send: %v %+v", err, out)
		}
		var handled atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 4, TracerProvider: tp,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				handled.Add(1)
				return nil
			}),
		})
		if !waitUntil(time.Minute, func() bool { return handled.Load() == 3 }) {
			t.Fatalf("%d handled, want 3", handled.Load())
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		linked := map[trace.TraceID]bool{}
		var messages int64
		for _, s := range spans.Ended() {
			if s.Name() != "receive orders" {
				continue
			}
			for _, kv := range s.Attributes() {
				if kv.Key == "messaging.batch.message_count" {
					messages += kv.Value.AsInt64()
				}
			}
			for _, l := range s.Links() {
				linked[l.SpanContext.TraceID()] = true
			}
		}
		if len(linked) != 3 || messages != 3 {
			t.Fatalf("receive spans link to %d traces with %d messages, want the 3 of %v", len(linked), messages, traces)
		}
		for tid := range traces {
			if !linked[tid] {
				t.Fatalf("no link to trace %s", tid)
			}
		}
	})
}
