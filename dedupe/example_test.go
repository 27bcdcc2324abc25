package dedupe_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
)

// A message sent twice with the same sqsonce-id runs its handler once; the
// copy is acked as a duplicate. The same id with another body is key reuse.
func ExampleNew() {
	store := dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "orders"})
	mw, err := dedupe.New(dedupe.Config{Store: store, Lease: time.Minute})
	if err != nil {
		panic(err)
	}
	p := consumertest.New(consumer.Config{
		Handler: consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
			fmt.Println("charging", msg.Body)
			return nil
		}),
		Middleware: []consumer.Middleware{mw.Wrap},
	})
	for i, body := range []string{"order 42: $10", "order 42: $10", "order 42: $99"} {
		msg := consumertest.NewMessage(body,
			consumertest.WithID(fmt.Sprint("sqs-message-", i)),
			consumertest.WithAttribute(consumer.AttrID, "order-42"))
		res := p.Process(context.Background(), msg)
		fmt.Println(strings.TrimSpace(res.Outcome.String() + " " + res.Class))
	}
	// Output:
	// charging order 42: $10
	// ack
	// duplicate
	// dead_letter key_reuse
}
