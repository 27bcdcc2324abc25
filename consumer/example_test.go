package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
)

func ExampleNew() {
	type order struct {
		ID string `json:"id"`
	}
	handler := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		var o order
		if err := json.Unmarshal([]byte(m.Body), &o); err != nil || o.ID == "" {
			return consumer.Permanent(fmt.Errorf("bad order: %w", err)) // dead-lettered at once
		}
		return nil // acked
	})
	// In a program: Client: sqs.NewFromConfig(awsCfg), then c.Run(ctx).
	_, err := consumer.New(consumer.Config{QueueName: "orders", Handler: handler})
	fmt.Println(err)

	// The same handler through the consumer's real classification path.
	fmt.Println(consumertest.Process(context.Background(), handler, consumertest.NewMessage(`{"id":"42"}`)).Outcome)
	fmt.Println(consumertest.Process(context.Background(), handler, consumertest.NewMessage(`not json`)).Outcome)
	// Output:
	// consumer: Client is required: pass an *sqs.Client
	// ack
	// dead_letter
}

// Your classifier answers for the errors it knows; every other error gets
// the consumer's classification, with the Config's Backoff and
// MaxAttempts. (consumertest runs the consumer's per-message path.)
func ExampleClassifierChain() {
	errThrottled := errors.New("throttled")
	errInvalid := errors.New("invalid")
	mine := consumer.ClassifierFunc(func(ctx context.Context, m *consumer.Message, err error) (consumer.Verdict, bool) {
		switch {
		case errors.Is(err, errInvalid):
			return consumer.Verdict{Outcome: consumer.OutcomeDeadLetter, Class: "invalid"}, true
		case errors.Is(err, errThrottled):
			return consumer.Verdict{Outcome: consumer.OutcomeRetry, Delay: 30 * time.Second}, true
		}
		return consumer.Verdict{}, false // no opinion: the consumer decides
	})
	errs := map[string]error{"invalid": errInvalid, "throttled": errThrottled, "down": errors.New("downstream down")}
	h := consumertest.New(consumer.Config{
		Classifier:  consumer.ClassifierChain(mine),
		MaxAttempts: 5,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			return errs[m.Body] // nil for "ok"
		}),
	})
	for _, body := range []string{"ok", "invalid", "throttled", "down"} {
		r := h.Process(context.Background(), consumertest.NewMessage(body, consumertest.WithReceiveCount(5)))
		switch r.Outcome {
		case consumer.OutcomeRetry:
			fmt.Println(body, "→", r.Outcome, "after", r.Delay)
		case consumer.OutcomeDeadLetter:
			fmt.Println(body, "→", r.Outcome, r.Class)
		default:
			fmt.Println(body, "→", r.Outcome)
		}
	}
	// Output:
	// ok → ack
	// invalid → dead_letter invalid
	// throttled → retry after 30s
	// down → dead_letter max_attempts
}
