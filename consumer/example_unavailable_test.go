package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// events records a consumer's pauses, and the charges made.
type events struct {
	consumer.NopObserver
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) Paused(p consumer.Pause) {
	e.add(fmt.Sprintf("paused (%s) for %s, pause %d", p.Reason, p.For, p.Count))
}

func (e *events) Resumed(time.Duration) { e.add("resumed") }

// A handler whose downstream (a bank) answers its first two calls with
// 503 and a Retry-After of 100 ms says so with Unavailable. The consumer
// pauses instead of receiving on: it holds the message it received with
// the first, runs it as the probe after the pause, holds it again when
// the bank is still down, and resumes once a probe gets through. The
// first message is retried after the pause (here 1 s: visibility is in
// whole seconds) and charged then; nothing is dead-lettered.
func ExampleUnavailable() {
	sqsClient := sqsfake.New()
	dlqURL := sqsClient.AddQueue("charges-dlq", nil)
	queueURL := sqsClient.AddQueue("charges", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:charges-dlq","maxReceiveCount":"3"}`,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, body := range []string{"charge 1", "charge 2", "charge 3"} {
		if _, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
			panic(err)
		}
	}

	ev := &events{}
	var mu sync.Mutex
	calls, charged := 0, 0
	c, err := consumer.New(consumer.Config{
		Client: sqsClient, QueueURL: queueURL, Observer: ev,
		Concurrency: 1, // one call at a time, so that the story reads in order
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls <= 2 { // the bank's answer
				return consumer.Unavailable(errors.New("bank: 503 Service Unavailable"), 100*time.Millisecond)
			}
			ev.add("charged: " + m.Body)
			if charged++; charged == 3 {
				cancel()
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
	for _, s := range ev.log {
		fmt.Println(s)
	}
	fmt.Println("dead-lettered:", len(sqsClient.Messages(dlqURL)))
	// Output:
	// paused (unavailable) for 100ms, pause 1
	// paused (unavailable) for 100ms, pause 2
	// charged: charge 2
	// resumed
	// charged: charge 3
	// charged: charge 1
	// dead-lettered: 0
}
