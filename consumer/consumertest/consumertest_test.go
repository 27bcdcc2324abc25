package consumertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/deadletter"
)

func TestProcessOutcomes(t *testing.T) {
	t.Parallel()
	h := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		var v struct{ ID string }
		if err := json.Unmarshal([]byte(m.Body), &v); err != nil {
			return consumer.Permanent(err)
		}
		if v.ID == "panic" {
			panic("oops")
		}
		return nil
	})
	if r := consumertest.Process(context.Background(), h, consumertest.NewMessage(`{"ID":"1"}`)); r.Outcome != consumer.OutcomeAck || r.DeadLetter != nil {
		t.Errorf("valid: %+v", r)
	}
	r := consumertest.Process(context.Background(), h, consumertest.NewMessage(`nope`, consumertest.WithAttribute("tenant", "acme")))
	if r.Outcome != consumer.OutcomeDeadLetter || r.Failure == nil || r.Failure.Class != consumer.ClassPermanent {
		t.Fatalf("malformed: %+v", r)
	}
	if aws.ToString(r.DeadLetter.MessageBody) != "nope" || aws.ToString(r.DeadLetter.QueueUrl) != consumertest.DefaultDeadLetterQueueURL {
		t.Errorf("dead letter %+v", r.DeadLetter)
	}
	dl := consumertest.DeadLetter(r)
	if f, ok := deadletter.ParseFailure(dl.Attributes); !ok || f.SourceQueue != consumertest.DefaultQueueURL || dl.Attribute("tenant") != "acme" {
		t.Errorf("dead letter as received: failure %+v ok %v attrs %v", f, ok, dl.Attributes)
	}
	if r := consumertest.Process(context.Background(), h, consumertest.NewMessage(`{"ID":"panic"}`)); r.Outcome != consumer.OutcomeRetry || r.Class != consumer.ClassPanic {
		t.Errorf("panic: %+v", r)
	}
}

func TestHarnessMiddlewareAndKey(t *testing.T) {
	t.Parallel()
	var order []string
	mw := func(name string) consumer.Middleware {
		return func(next consumer.Handler) consumer.Handler {
			return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				order = append(order, name+":"+m.Key())
				return next.Handle(ctx, m)
			})
		}
	}
	h := &consumertest.Harness{FIFO: true, Config: consumer.Config{
		Middleware:  []consumer.Middleware{mw("outer"), mw("inner")},
		KeyFunc:     func(m *consumer.Message) string { return m.Attribute("order") },
		MaxAttempts: 2,
		Handler:     consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return errors.New("down") }),
	}}
	r := h.Process(context.Background(), consumertest.NewMessage("b",
		consumertest.WithAttribute("order", "o-9"), consumertest.WithReceiveCount(2), consumertest.WithGroup("g"), consumertest.WithID("m1")))
	if len(order) != 2 || order[0] != "outer:o-9" || order[1] != "inner:o-9" {
		t.Errorf("middleware order %v", order)
	}
	if r.Outcome != consumer.OutcomeDeadLetter || r.Failure.Class != consumer.ClassMaxAttempts || r.Failure.Attempts != 2 {
		t.Errorf("result %+v failure %+v", r.Result, r.Failure)
	}
	if aws.ToString(r.DeadLetter.MessageGroupId) != "g" || aws.ToString(r.DeadLetter.MessageDeduplicationId) != "m1" ||
		aws.ToString(r.DeadLetter.MessageAttributes[consumer.AttrID].StringValue) != "o-9" {
		t.Errorf("FIFO dead letter %+v", r.DeadLetter)
	}
}

func TestShutdownRelease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(consumer.ErrShutdown)
	r := consumertest.Process(ctx, consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Message) error { return ctx.Err() }), consumertest.NewMessage("x"))
	if r.Outcome != consumer.OutcomeRelease {
		t.Errorf("outcome %s, want release", r.Outcome)
	}
}
