package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
)

// A handler whose downstream (a bank) answered 503 with a Retry-After of
// 30 s says so with Unavailable. The message is retried after the
// Retry-After, on its third receive as on its first (it is no attempt
// toward MaxAttempts, and never dead-lettered for it); in a running
// consumer it also pauses receiving, holds what it received without
// running it, and resumes once a probe gets through.
func ExampleUnavailable() {
	h := consumertest.New(consumer.Config{
		MaxAttempts: 3,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			return consumer.Unavailable(errors.New("bank: 503 Service Unavailable"), 30*time.Second)
		}),
	})
	res := h.Process(context.Background(), consumertest.NewMessage(`{"id":"c1"}`, consumertest.WithReceiveCount(3)))
	fmt.Println(res.Outcome, res.Class, res.Delay)
	// Output: retry unavailable 30s
}
