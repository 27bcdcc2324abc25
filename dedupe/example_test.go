package dedupe_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

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
		msg := consumer.NewMessage(types.Message{
			MessageId: aws.String(fmt.Sprint("sqs-message-", i)),
			Body:      aws.String(body),
			MessageAttributes: map[string]types.MessageAttributeValue{
				consumer.AttrID: {DataType: aws.String("String"), StringValue: aws.String("order-42")},
			},
		}, "orders", time.Now())
		res := p.Process(context.Background(), msg)
		fmt.Println(strings.TrimSpace(res.Outcome.String() + " " + res.Class))
	}
	// Output:
	// charging order 42: $10
	// ack
	// duplicate
	// dead_letter key_reuse
}
