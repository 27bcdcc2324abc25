package redrive_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/redrive"
)

// poisonSend is an SQS client whose SendMessageBatch refuses, as a sender
// fault, the entries whose body is poison; everything else goes to the
// real queue.
type poisonSend struct {
	redrive.SQSAPI
	poison string
}

func (p poisonSend) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	cp := *in
	cp.Entries = nil
	var failed []types.BatchResultErrorEntry
	for _, e := range in.Entries {
		if aws.ToString(e.MessageBody) == p.poison {
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String("poisoned by the test"), SenderFault: true})
			continue
		}
		cp.Entries = append(cp.Entries, e)
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(cp.Entries) > 0 {
		var err error
		if out, err = p.SQSAPI.SendMessageBatch(ctx, &cp, optFns...); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// TestMoveMetrics moves dead letters with a filter on the local stack, one
// refused (its recorded source does not feed the DLQ) and one whose send
// fails, and checks that the meter provider's counts are exactly those of
// the summary; a dry run adds nothing.
func TestMoveMetrics(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	ctx := context.Background()
	src, dlq := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{})
	victim, _ := testenv.Queue(t, client, testenv.Prefix(t)+"-victim", testenv.QueueOptions{})
	msgs := seq("move", 5, src)
	msgs = append(msgs,
		dead{body: "poison", class: "permanent", source: src},
		dead{body: "forged", class: "permanent", source: victim},
		dead{body: "other-1", class: "max_attempts", source: src},
		dead{body: "other-2", class: "max_attempts", source: src},
	)
	putDead(t, client, dlq, false, msgs...)

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	r, err := redrive.New(redrive.Config{Client: poisonSend{SQSAPI: client, poison: "poison"}, EmptyReceives: 1, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	q := resolve(t, r, dlq)
	only, _ := redrive.ParseFilters("class=permanent")
	if sum, err := r.Plan(ctx, q, redrive.MoveOptions{Filters: only}); err != nil || sum.Matched != 6 {
		t.Fatalf("dry run: %+v %v", sum, err)
	}
	sum, err := r.Move(ctx, q, redrive.MoveOptions{Filters: only})
	if err != nil {
		t.Fatalf("move: %v (%+v)", err, sum)
	}
	if sum.Moved != 5 || sum.Failed != 1 || sum.Refused != 1 || sum.Skipped != 2 {
		t.Fatalf("summary %+v, want moved 5, failed 1, refused 1, skipped 2", sum)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	runs := uint64(0)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name != "sqsonce.redrive.messages" {
					continue
				}
				for _, p := range d.DataPoints {
					res, _ := p.Attributes.Value(attribute.Key("sqsonce.redrive.result"))
					op, _ := p.Attributes.Value(attribute.Key("sqsonce.redrive.operation"))
					name, _ := p.Attributes.Value(attribute.Key("messaging.destination.name"))
					if op.AsString() != "move" || name.AsString() != q.Name {
						t.Errorf("data point attributes %v", p.Attributes.ToSlice())
					}
					got[res.AsString()] += p.Value
				}
			case metricdata.Histogram[float64]:
				if m.Name != "sqsonce.redrive.duration" {
					continue
				}
				for _, p := range d.DataPoints {
					runs += p.Count
				}
			}
		}
	}
	want := map[string]int64{"moved": 5, "failed": 1, "refused": 1, "skipped": 2}
	if len(got) != len(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("sqsonce.redrive.messages{result=%s} = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if runs != 1 {
		t.Errorf("sqsonce.redrive.duration has %d runs, want 1 (the dry run records nothing)", runs)
	}
}
