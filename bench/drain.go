package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// runDrain drains N messages already in a queue through the sqsonce
// consumer and prints msgs_per_s, timed from the first receive to the last
// delete. The endpoint comes from the standard SDK variables, never from
// the queue URL's host.
func runDrain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queueURL := fs.String("queue-url", "", "queue to drain (required)")
	n := fs.Int("n", 0, "messages to drain (required)")
	concurrency := fs.Int("concurrency", 10, "handlers at once")
	delay := fs.Duration("handler-delay", 0, "time each handler sleeps (0: no-op)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *queueURL == "" || *n <= 0 || *concurrency <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: bench drain -queue-url URL -n N [-concurrency C] [-handler-delay D]")
		return 2
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bench drain:", err)
		return 1
	}
	res, err := runConsumer(ctx, sqs.NewFromConfig(cfg), *queueURL, *n, runOpts{concurrency: *concurrency, handlerDelay: *delay, timeout: 30 * time.Minute})
	if err != nil {
		fmt.Fprintln(stderr, "bench drain:", err)
		return 1
	}
	fmt.Fprintf(stdout, "drained=%d msgs_per_s=%.1f elapsed=%s sqs_calls=%d\n", *n, res.rate, res.elapsed.Round(time.Millisecond), total(res.calls))
	return 0
}

func total(calls map[string]int64) int64 {
	var t int64
	for k, v := range calls {
		if k == "ChangeMessageVisibilityBatch.entries" {
			continue
		}
		t += v
	}
	return t
}
