// Command lambda is a sqsonce consumer as an AWS Lambda function behind an
// SQS event source mapping (with ReportBatchItemFailures on): the same
// order handler as examples/worker, with dedupe in DynamoDB, through the
// sqslambda adapter. template.yaml deploys it with its queue, dead-letter
// queue, dedupe table and event source mapping.
//
// Environment:
//
//	QUEUE_URL                    the source queue (optional: lets the start-up check run before the first event)
//	DEDUPE_TABLE                 the DynamoDB dedupe table (optional: no dedupe without it)
//	DEDUPE_NAMESPACE             the dedupe namespace (default: the queue URL, else "orders")
//	CONCURRENCY                  records of a batch at once (default 1)
//	LOG_LEVEL                    debug, info, warn or error (default info)
//	AWS_LAMBDA_FUNCTION_TIMEOUT  the function timeout in seconds, for the start-up check
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	ctx := context.Background()
	h, logger, err := newFunction(ctx, os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lambda: %v\n", err)
		os.Exit(1)
	}
	defer func() { _ = logger.Sync() }()
	_ = h.Check(ctx) // logs a warning when visibility < 6 × the function timeout
	lambda.Start(h.Handle)
}
