package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
)

// A Classifier built the way the package documents it keeps the
// consumer's MaxAttempts and Backoff for every error it has no opinion on:
// the third failed receive with MaxAttempts 3 is dead-lettered (class
// max_attempts), and an earlier one is retried after Backoff's delay.
func TestDocumentedChainKeepsMaxAttemptsAndBackoff(t *testing.T) {
	t.Parallel()
	errThrottled := errors.New("throttled")
	mine := consumer.ClassifierFunc(func(_ context.Context, _ *consumer.Message, err error) (consumer.Verdict, bool) {
		if errors.Is(err, errThrottled) {
			return consumer.Verdict{Outcome: consumer.OutcomeRetry, Delay: 30 * time.Second}, true
		}
		return consumer.Verdict{}, false
	})
	h := consumertest.New(consumer.Config{
		MaxAttempts: 3,
		Backoff:     consumer.Backoff{Base: 5 * time.Second, RandFunc: func(n int64) int64 { return n - 1 }}, // always the ceiling
		Classifier:  consumer.ClassifierChain(mine),                                                          // no catch-all: the rest falls back,
		Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
			if m.Body == "throttled" {
				return errThrottled
			}
			return errors.New("downstream failed")
		}),
	})
	ctx := context.Background()
	if r := h.Process(ctx, consumertest.NewMessage("x", consumertest.WithReceiveCount(3))); r.Outcome != consumer.OutcomeDeadLetter || r.Class != consumer.ClassMaxAttempts {
		t.Errorf("third receive with MaxAttempts 3: outcome %s class %q, want dead_letter max_attempts", r.Outcome, r.Class)
	}
	if r := h.Process(ctx, consumertest.NewMessage("x", consumertest.WithReceiveCount(2))); r.Outcome != consumer.OutcomeRetry || r.Delay != 10*time.Second {
		t.Errorf("second receive: outcome %s delay %s, want retry after Backoff's ceiling 10s (Base 5s · 2)", r.Outcome, r.Delay)
	}
	if r := h.Process(ctx, consumertest.NewMessage("throttled", consumertest.WithReceiveCount(3))); r.Outcome != consumer.OutcomeRetry || r.Delay != 30*time.Second {
		t.Errorf("own rule: outcome %s delay %s, want retry 30s", r.Outcome, r.Delay)
	}
}
