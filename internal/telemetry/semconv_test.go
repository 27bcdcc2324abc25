package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The messaging metrics carry the attributes the semantic conventions
// require: messaging.system and messaging.operation.name on each,
// messaging.operation.type where the operation is one, and error.type on
// a failed call.
func TestMetricAttributes(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ctx := context.Background()
	c := NewConsumer(nil, mp, "https://sqs.us-east-1.amazonaws.com/1/orders")
	c.Received(ctx)
	c.HandlerDone(ctx, time.Millisecond)
	c.Call(ctx, "ReceiveMessage", time.Millisecond, nil, 1)
	c.Call(ctx, "DeleteMessageBatch", time.Millisecond, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"}, -1)
	c.Call(ctx, "SendMessage", time.Millisecond, errors.New("boom"), -1)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []string
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes.Encoded(attribute.DefaultEncoder()))
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes.Encoded(attribute.DefaultEncoder()))
				}
			}
			got[m.Name] = append(got[m.Name], sets...)
		}
	}
	want := map[string][]string{
		"messaging.client.consumed.messages": {"messaging.destination.name=orders,messaging.operation.name=receive,messaging.operation.type=receive,messaging.system=aws_sqs"},
		"messaging.process.duration":         {"messaging.destination.name=orders,messaging.operation.name=process,messaging.operation.type=process,messaging.system=aws_sqs"},
		"messaging.client.operation.duration": {
			"messaging.destination.name=orders,messaging.operation.name=ReceiveMessage,messaging.operation.type=receive,messaging.system=aws_sqs",
			"error.type=AWS.SimpleQueueService.NonExistentQueue,messaging.destination.name=orders,messaging.operation.name=DeleteMessageBatch,messaging.operation.type=settle,messaging.system=aws_sqs",
			"error.type=_OTHER,messaging.destination.name=orders,messaging.operation.name=SendMessage,messaging.operation.type=send,messaging.system=aws_sqs",
		},
		"messaging.client.sent.messages": {"error.type=_OTHER,messaging.destination.name=orders,messaging.operation.name=SendMessage,messaging.operation.type=send,messaging.system=aws_sqs"},
	}
	for name, sets := range want {
		for _, w := range sets {
			found := false
			for _, g := range got[name] {
				found = found || g == w
			}
			if !found {
				t.Errorf("%s: no data point with %s; have %q", name, w, got[name])
			}
		}
	}
}

// A receive span that is not recorded builds no links: ending it costs
// no allocation, however many traced messages the call brought.
func TestUnrecordedReceiveBuildsNoLinks(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	c := NewConsumer(tp, nil, "")
	msgs := make([]types.Message, 10)
	for i := range msgs {
		msgs[i] = types.Message{
			MessageId:  aws.String("m"),
			Attributes: map[string]string{AttrAWSTraceHeader: "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"},
		}
	}
	_, span := c.tracer.Start(context.Background(), "receive orders")
	if n := testing.AllocsPerRun(100, func() { endReceive(span, msgs, nil) }); n != 0 {
		t.Fatalf("ending an unrecorded receive span allocated %v times, want 0", n)
	}
}

// The outcomes' settled sets built with the Consumer are the ones the
// named outcomes count into.
func TestOutcomeNames(t *testing.T) {
	for i, o := range outcomeNames {
		if outcomeIndex(o) != i {
			t.Errorf("outcomeIndex(%q) = %d, want %d", o, outcomeIndex(o), i)
		}
	}
	if outcomeIndex("other") != -1 {
		t.Error("outcomeIndex of an unknown outcome is not -1")
	}
}
