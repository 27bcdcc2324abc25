package envelope_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/envelope"
	"github.com/sqsonce/sqsonce/internal/delivery"
)

// handle runs the message through mw and a handler that succeeds.
func handle(t *testing.T, mw consumer.Middleware, msg *consumer.Message) {
	t.Helper()
	ok := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	if res := consumertest.Process(context.Background(), ok, msg, mw); res.Outcome != consumer.OutcomeAck {
		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
	}
}

func onQueue(body, queueURL string) *consumer.Message {
	return delivery.New(types.Message{MessageId: aws.String("m-" + queueURL), Body: aws.String(body), ReceiptHandle: aws.String("rh")}, queueURL, time.Now())
}

// An envelope without sqsonce-id is keyed by the SNS MessageId, which a
// publisher's retry does not keep: Unwrap says so once per queue (the
// consumer of that queue), at warn level, without the body; envelopes
// with sqsonce-id say nothing. Two Unwrap middlewares keep their own
// count: nothing is shared between consumers.
func TestWarnsOnceAboutTheMessageIdFallback(t *testing.T) {
	t.Parallel()
	without := fixture(t, "sns-notification.json")
	with := fixture(t, "sns-with-attributes.json")
	other := "https://sqs.us-east-1.amazonaws.com/123456789012/other"

	core, logs := observer.New(zapcore.InfoLevel)
	mw := envelope.Unwrap(envelope.Options{Logger: zap.New(core)})
	handle(t, mw, consumertest.NewMessage(with))
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Fatalf("%d warnings for an envelope with sqsonce-id, want none", n)
	}
	for range 3 {
		handle(t, mw, consumertest.NewMessage(without))
	}
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 1 {
		t.Fatalf("%d warnings for three envelopes without sqsonce-id on one queue, want 1", len(warns))
	}
	w := warns[0]
	if !strings.Contains(w.Message, "sqsonce-id") || !strings.Contains(w.Message, "retr") {
		t.Errorf("warning %q does not say that the fallback misses publisher retries", w.Message)
	}
	f := w.ContextMap()
	if f["sns_message_id"] != "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324" || f["queue_url"] != consumertest.DefaultQueueURL {
		t.Errorf("warning fields %v, want the SNS MessageId and the queue", f)
	}
	for k, v := range f {
		if s, ok := v.(string); ok && strings.Contains(s, "o-1") {
			t.Errorf("warning field %s carries the body: %q", k, s)
		}
	}

	handle(t, mw, onQueue(without, other))
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 2 {
		t.Fatalf("%d warnings after the first envelope without sqsonce-id on a second queue, want 2", n)
	}

	core2, logs2 := observer.New(zapcore.InfoLevel)
	mw2 := envelope.Unwrap(envelope.Options{Logger: zap.New(core2)})
	handle(t, mw2, consumertest.NewMessage(without))
	if n := logs2.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Fatalf("a second Unwrap warned %d times, want once (its own)", n)
	}
}

// A KeyFunc that finds the publisher's id in the body replaces the
// fallback: no warning.
func TestNoFallbackWarningWithAKeyFunc(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	mw := envelope.Unwrap(envelope.Options{Logger: zap.New(core), KeyFunc: func(*consumer.Message) string { return "order-o-1" }})
	handle(t, mw, consumertest.NewMessage(fixture(t, "sns-notification.json")))
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Fatalf("%d warnings with a KeyFunc that found a key, want none", n)
	}
}
