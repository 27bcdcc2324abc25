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

func ExampleClassifierChain() {
	errThrottled := errors.New("throttled")
	errInvalid := errors.New("invalid")
	mine := consumer.ClassifierFunc(func(ctx context.Context, m *consumer.Message, err error) (consumer.Verdict, bool) {
		switch {
		case errors.Is(err, errInvalid):
			return consumer.Verdict{Outcome: consumer.OutcomeDeadLetter, Class: consumer.ClassPermanent}, true
		case errors.Is(err, errThrottled):
			return consumer.Verdict{Outcome: consumer.OutcomeRetry, Delay: 30 * time.Second}, true
		}
		return consumer.Verdict{}, false // no opinion: the default decides
	})
	chain := consumer.ClassifierChain(mine, consumer.DefaultClassifier(consumer.Backoff{}, 5))
	m := consumertest.NewMessage("{}")
	for _, err := range []error{nil, errInvalid, errThrottled, consumer.ErrDuplicate} {
		v, _ := chain.Classify(context.Background(), m, err)
		fmt.Println(v.Outcome, v.Delay)
	}
	// Output:
	// ack 0s
	// dead_letter 0s
	// retry 30s
	// duplicate 0s
}
