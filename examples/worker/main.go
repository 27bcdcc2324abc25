// Command worker is an ECS-style sqsonce worker: it consumes one queue
// until SIGTERM or SIGINT, then drains (stops receiving, lets running
// handlers finish within the shutdown timeout, flushes every delete) and
// exits 0. Logs are zap JSON on stderr, unsampled, so at debug level every
// settled message has its line.
//
// Configuration comes from flags, each defaulting to an environment
// variable:
//
//	-queue-url URL        QUEUE_URL         the queue (or -queue NAME / QUEUE_NAME)
//	-concurrency N        CONCURRENCY       handlers at once (default 10)
//	-visibility D         VISIBILITY        visibility timeout, e.g. 60s (default: the queue's)
//	-dedupe-table T       DEDUPE_TABLE      DynamoDB dedupe table (default: no dedupe)
//	-log-level L          LOG_LEVEL         debug, info, warn or error (default info)
//	-shutdown-timeout D   SHUTDOWN_TIMEOUT  drain limit after SIGTERM (default 20s)
//	-max-attempts N       MAX_ATTEMPTS      dead-letter after N transient failures (default 0: no limit)
//	-http-addr HOST:PORT  HTTP_ADDR         serve /metrics, /healthz and /readyz (package opshttp); empty: off
//
// Endpoints, region and credentials come from the standard AWS SDK
// variables. Each message is an order, a JSON object with a non-empty
// "order_id"; anything else is dead-lettered with its reason.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
