package consumer_test

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/awsconfig"
	"github.com/sqsonce/sqsonce/consumer"
)

// A worker's main: Run receives and handles messages until SIGTERM, then
// drains (it stops receiving, releases what has not started, waits for
// running handlers up to ShutdownTimeout, sends every pending delete and
// visibility change) and returns. awsconfig.Load reads the standard
// variables, so the same program runs against AWS or, with the variables
// the local stack writes (make stack-up), against it. Each outcome
// settles as the handler says: "ship 1" is acked (deleted), "malformed"
// is dead-lettered at once, "warehouse down" comes back in a minute.
func ExampleConsumer_Run() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	awsCfg, err := awsconfig.Load(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(consumer.Config{
		Client:    sqs.NewFromConfig(awsCfg),
		QueueName: "orders", // its RedrivePolicy names the dead-letter queue
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
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
