package sqslambdatest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
	"github.com/sqsonce/sqsonce/sqslambda/sqslambdatest"
)

// One batch of three through an sqslambda function, as the event source
// mapping runs it: the order is handled and deleted; the malformed one is
// sent to the dead-letter queue by sqsonce, reported as a success and
// deleted; the busy one is the batch item failure, left on the queue to
// come back in a minute. In a test against the local stack, Client is an
// *sqs.Client.
func ExampleMapping_Poll() {
	ctx := context.Background()
	sqsClient := sqsfake.New() // an in-process SQS
	dlqURL := sqsClient.AddQueue("orders-dlq", nil)
	queueURL := sqsClient.AddQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})

	// The function under test.
	h, err := sqslambda.New(sqslambda.Config{
		Client: sqsClient,
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

	bodies := map[string]string{} // MessageId → body
	for _, body := range []string{"order", "malformed", "busy"} {
		out, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)})
		if err != nil {
			panic(err)
		}
		bodies[aws.ToString(out.MessageId)] = body
	}

	esm, err := sqslambdatest.New(ctx, sqslambdatest.Config{Client: sqsClient, QueueURL: queueURL, HandleFunc: h.Handle})
	if err != nil {
		panic(err)
	}
	res, err := esm.Poll(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("records:", len(res.Invoked), "whole batch failed:", res.Err != nil)
	for _, id := range res.Deleted {
		fmt.Println("deleted:", bodies[id])
	}
	for _, id := range res.Failed {
		fmt.Println("left to come back:", bodies[id])
	}
	for _, m := range sqsClient.Messages(dlqURL) {
		fmt.Println("dead-lettered:", m.Body)
	}
	// Output:
	// records: 3 whole batch failed: false
	// deleted: order
	// deleted: malformed
	// left to come back: busy
	// dead-lettered: malformed
}

// Drain polls until the queue stays empty: here five messages in batches
// of two.
func ExampleMapping_Drain() {
	ctx := context.Background()
	sqsClient := sqsfake.New()
	queueURL := sqsClient.AddQueue("orders", nil)
	for i := range 5 {
		sqsClient.Put(queueURL, fmt.Sprintf(`{"order_id":"o-%d"}`, i), "")
	}
	h, err := sqslambda.New(sqslambda.Config{
		Client:  sqsClient,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error { return nil }),
	})
	if err != nil {
		panic(err)
	}
	esm, err := sqslambdatest.New(ctx, sqslambdatest.Config{
		Client: sqsClient, QueueURL: queueURL, HandleFunc: h.Handle,
		BatchSize:     2,
		EmptyReceives: 1, // one empty receive (a 1s long poll) ends it
	})
	if err != nil {
		panic(err)
	}
	results, err := esm.Drain(ctx)
	if err != nil {
		panic(err)
	}
	for i, r := range results {
		fmt.Printf("invocation %d: %d records, %d deleted\n", i+1, len(r.Invoked), len(r.Deleted))
	}
	fmt.Println("left in the queue:", len(sqsClient.Messages(queueURL)))
	// Output:
	// invocation 1: 2 records, 2 deleted
	// invocation 2: 2 records, 2 deleted
	// invocation 3: 1 records, 1 deleted
	// left in the queue: 0
}
