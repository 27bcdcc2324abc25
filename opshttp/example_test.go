package opshttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/opshttp"
)

// /healthz and /readyz of a worker with one consumer, before it runs,
// while it runs, and after it drained. In a program, opshttp.Listen serves
// them on an address of their own (and Config.Metrics adds /metrics).
func Example() {
	// An in-process SQS; in a program, sqs.NewFromConfig(awsCfg).
	sqsClient := sqsfake.New()
	sqsClient.AddQueue("orders-dlq", nil)
	queueURL := sqsClient.AddQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	})
	handled := make(chan struct{})
	c, err := consumer.New(consumer.Config{
		Client:   sqsClient,
		QueueURL: queueURL,
		Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
			close(handled)
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	mux, err := opshttp.New(opshttp.Config{Ready: []opshttp.Readier{c}})
	if err != nil {
		panic(err)
	}
	get := func(path string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Printf("%s %d %s", path, rec.Code, rec.Body)
	}

	get("/healthz")
	get("/readyz") // Run has not started

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	if _, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("o-1")}); err != nil {
		panic(err)
	}
	<-handled
	get("/readyz") // receiving

	cancel() // SIGTERM: from here /readyz is 503 while the drain runs
	if err := <-done; err != nil {
		panic(err)
	}
	get("/readyz")
	// Output:
	// /healthz 200 ok
	// /readyz 503 not ready: consumer: not running
	// /readyz 200 ready
	// /readyz 503 not ready: consumer: not running
}
