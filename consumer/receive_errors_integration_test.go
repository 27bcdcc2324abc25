package consumer_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestQueueDeletedOnTheStack (issue 42, defect 11): the queue is deleted
// under a running consumer on the local stack. Run reports every failed
// receive, is not ready, and returns, once ReceiveErrorGrace has passed,
// an error that names the queue and SQS's error.
func TestQueueDeletedOnTheStack(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{VisibilityTimeout: 30})
	sendN(t, client, queueURL, 3, nil)
	var handled atomic.Int64
	obs := &failObserver{}
	c, err := consumer.New(consumer.Config{
		Client: client, QueueURL: queueURL, WaitTime: time.Second, ReceiveErrorGrace: 3 * time.Second,
		Observer: obs,
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
			handled.Add(1)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	for handled.Load() < 3 {
		select {
		case err := <-errc:
			t.Fatalf("Run returned before the queue was deleted: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(queueURL)}); err != nil {
		t.Fatal(err)
	}
	var notReady error
	for {
		select {
		case err := <-errc:
			if ctx.Err() != nil {
				t.Fatalf("Run returned only when its context ended: %v", err)
			}
			if err == nil || !strings.Contains(err.Error(), queueURL) || !strings.Contains(err.Error(), "QueueDoesNotExist") && !strings.Contains(err.Error(), "NonExistentQueue") {
				t.Fatalf("Run = %v, want an error naming %s and QueueDoesNotExist", err, queueURL)
			}
			if obs.count() == 0 {
				t.Error("the Observer saw no failed receive")
			}
			if notReady == nil {
				t.Error("Ready reported no error while receives failed")
			}
			return
		case <-time.After(50 * time.Millisecond):
			if err := c.Ready(); err != nil && strings.Contains(err.Error(), "failing") {
				notReady = err
			}
		}
	}
}
