package sqslambda_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// A batch of three: one acked, one permanent failure (sent to the DLQ by
// sqsonce, so Lambda may delete it), one to retry in a minute (the only
// batch item failure). In a function, pass h.Handle to lambda.Start and an
// *sqs.Client as Client.
func ExampleHandler_Handle() {
	fake := newFake() // the tests' in-process SQS
	h, err := sqslambda.New(sqslambda.Config{
		Client: fake, // an *sqs.Client in a real function
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			switch m.Body {
			case "malformed":
				return consumer.Permanent(errors.New("cannot parse the order"))
			case "busy":
				return consumer.RetryAfter(errors.New("warehouse busy"), time.Minute)
			}
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	// The batch an event source mapping would pass: three messages
	// received from the queue.
	resp, _ := h.Handle(context.Background(), fake.event(
		rec(stdARN, "m1", "order", ""),
		rec(stdARN, "m2", "malformed", ""),
		rec(stdARN, "m3", "busy", ""),
	))
	for _, f := range resp.BatchItemFailures {
		fmt.Println("retry:", f.ItemIdentifier)
	}
	// Output: retry: m3
}
