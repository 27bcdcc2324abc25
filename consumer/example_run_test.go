package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// A consumer with a middleware that records each message's result; after
// three messages it cancels Run's context, and Run drains: it returns once
// every settle is sent. The ack is deleted, the permanent failure is in
// the dead-letter queue, the one to retry waits in the queue, invisible
// for a minute.
func ExampleConsumer_Run() {
	// An in-process SQS; in a program, sqs.NewFromConfig(awsCfg) and the
	// queues' URLs.
	sqsClient := sqsfake.New()
	dlqURL := sqsClient.AddQueue("orders-dlq", nil)
	queueURL := sqsClient.AddQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, body := range []string{"ship 1", "malformed", "warehouse down"} {
		if _, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
			panic(err)
		}
	}

	var (
		mu      sync.Mutex
		results []string
	)
	record := func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			err := next.Handle(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			results = append(results, fmt.Sprintf("%s: %v", m.Body, err))
			if len(results) == 3 {
				cancel() // stop: Run drains and returns
			}
			return err
		})
	}
	c, err := consumer.New(consumer.Config{
		Client:     sqsClient,
		QueueURL:   queueURL,
		Middleware: []consumer.Middleware{record},
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			switch m.Body {
			case "malformed":
				return consumer.Permanent(errors.New("cannot parse"))
			case "warehouse down":
				return consumer.RetryAfter(errors.New("warehouse unreachable"), time.Minute)
			}
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	if err := c.Run(ctx); err != nil {
		panic(err)
	}

	slices.Sort(results) // handlers run concurrently
	for _, r := range results {
		fmt.Println(r)
	}
	for _, m := range sqsClient.Messages(queueURL) {
		fmt.Println("in the queue:", m.Body)
	}
	for _, m := range sqsClient.Messages(dlqURL) {
		fmt.Println("dead-lettered:", m.Body)
	}
	// Output:
	// malformed: permanent: cannot parse
	// ship 1: <nil>
	// warehouse down: retry after 1m0s: warehouse unreachable
	// in the queue: warehouse down
	// dead-lettered: malformed
}
