package consumertest_test

import (
	"context"
	"fmt"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
)

// The same message delivered twice (SQS delivers at least once): with the
// dedupe middleware the charge runs once and the second delivery is acked
// as a duplicate.
func ExampleProcess() {
	ctx := context.Background()
	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "orders"}) // dedupedynamo.New in production
	charges := 0
	charge := consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		charges++
		return nil
	})
	dd, err := dedupe.New(dedupe.Config{Store: store})
	if err != nil {
		panic(err)
	}
	mw := dd.Wrap

	first := consumertest.NewMessage(`{"order":42}`, consumertest.WithID("m-42"))
	again := consumertest.NewMessage(`{"order":42}`, consumertest.WithID("m-42"), consumertest.WithReceiveCount(2))
	fmt.Println(consumertest.Process(ctx, charge, first, mw).Outcome)
	fmt.Println(consumertest.Process(ctx, charge, again, mw).Outcome)
	fmt.Println("charges:", charges)
	// Output:
	// ack
	// duplicate
	// charges: 1
}
