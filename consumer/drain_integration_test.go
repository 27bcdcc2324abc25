package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// On a real queue, Drain handles what was sent, once each, returns nil and
// leaves the queue empty.
func TestDrainOnQueue(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	const n = 60
	sendN(t, client, queueURL, n, nil)
	var mu sync.Mutex
	runs := map[string]int{}
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, Concurrency: 8, WaitTime: time.Second,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			mu.Lock()
			runs[m.Body]++
			mu.Unlock()
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Drain(ctx); err != nil {
		t.Fatalf("Drain = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != n {
		t.Errorf("%d messages handled, want %d", len(runs), n)
	}
	for b, k := range runs {
		if k != 1 {
			t.Errorf("message %s handled %d times, want once", b, k)
		}
	}
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range out.Attributes {
		if v != "0" {
			t.Errorf("%s = %s after Drain, want 0", k, v)
		}
	}
}
