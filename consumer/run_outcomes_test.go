package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// TestRunSettlesThenDrains: a consumer with a middleware that records
// each message's result; after three messages it cancels Run's context,
// and Run drains: it returns once every settle is sent. The ack is
// deleted, the permanent failure is in the dead-letter queue, the one to
// retry waits in the queue, invisible for a minute.
func TestRunSettlesThenDrains(t *testing.T) {
	t.Parallel()
	sqsClient := sqsfake.New()
	dlqURL := sqsClient.AddQueue("orders-dlq", nil)
	queueURL := sqsClient.AddQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, body := range []string{"ship 1", "malformed", "warehouse down"} {
		if _, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
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
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}

	slices.Sort(results) // handlers run concurrently
	var got []string
	got = append(got, results...)
	for _, m := range sqsClient.Messages(queueURL) {
		got = append(got, "in the queue: "+m.Body)
	}
	for _, m := range sqsClient.Messages(dlqURL) {
		got = append(got, "dead-lettered: "+m.Body)
	}
	want := []string{
		"malformed: permanent: cannot parse",
		"ship 1: <nil>",
		"warehouse down: retry after 1m0s: warehouse unreachable",
		"in the queue: warehouse down",
		"dead-lettered: malformed",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
