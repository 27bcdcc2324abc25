package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqsonce/sqsonce/consumer"
)

// runOpts shapes one consumer run.
type runOpts struct {
	n            int // messages to drain; 0: -n
	concurrency  int
	handlerDelay time.Duration
	handler      consumer.Handler // overrides the sleep/no-op handler
	// newHandler, when set, makes the handler of each try (see
	// bench.sqsonceOnce), so that a run done again starts afresh.
	newHandler func() consumer.Handler
	middleware []consumer.Middleware
	observer   consumer.Observer
	visibility time.Duration
	heartbeat  time.Duration
	waitTime   time.Duration
	dlq        string
	timeout    time.Duration
	// trackDeletes records when each message's delete call returned
	// (runResult.deleteReturned); it costs a map entry per message.
	trackDeletes bool
	// onDeleted is called with the running total after each delete call.
	onDeleted func(total int64)
	// tracerProvider and meterProvider turn the consumer's telemetry on.
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	// limits are the consumer's Limits (none by default).
	limits consumer.Limits
}

// runResult is what one consumer run measured.
type runResult struct {
	rate    float64          // messages/s, first receive to last delete
	calls   map[string]int64 // SQS calls by operation
	elapsed time.Duration
	allocs  float64 // this process's heap allocations per message
	used            // CPU (this process's and the server's) and switches per message
	// deleteReturned maps receipt handles to when their delete returned
	// (with runOpts.trackDeletes).
	deleteReturned map[string]time.Time
}

// runConsumer drains n messages from queueURL through a sqsonce consumer
// and stops once n are deleted.
func runConsumer(ctx context.Context, client *sqs.Client, queueURL string, n int, o runOpts) (runResult, error) {
	counting := newCounting(client, n)
	counting.onDeleted = o.onDeleted
	if o.trackDeletes {
		counting.deleteReturned = make(map[string]time.Time, n)
	}
	h := o.handler
	if h == nil {
		delay := o.handlerDelay
		h = consumer.HandlerFunc(func(ctx context.Context, _ *consumer.Message) error {
			if delay > 0 {
				t := time.NewTimer(delay)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			return nil
		})
	}
	dlq := o.dlq
	if dlq == "" {
		dlq = queueURL // permanent failures do not happen in these runs
	}
	c, err := consumer.New(consumer.Config{
		Client:             counting,
		QueueURL:           queueURL,
		Handler:            h,
		Middleware:         o.middleware,
		Observer:           o.observer,
		Concurrency:        o.concurrency,
		VisibilityTimeout:  o.visibility,
		HeartbeatInterval:  o.heartbeat,
		WaitTime:           cmpOr(o.waitTime, 2*time.Second),
		DeadLetterQueueURL: dlq,
		ShutdownTimeout:    10 * time.Second,
		TracerProvider:     o.tracerProvider,
		MeterProvider:      o.meterProvider,
		Limits:             o.limits,
	})
	if err != nil {
		return runResult{}, err
	}
	timeout := cmpOr(o.timeout, 10*time.Minute)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	mallocs0 := mallocs()
	m := readUsed()
	start := time.Now()
	go func() { errc <- c.Run(runCtx) }()
	select {
	case <-counting.done:
	case err := <-errc:
		return runResult{}, fmt.Errorf("consumer stopped early: %w", err)
	case <-time.After(timeout):
		stop()
		<-errc
		return runResult{}, fmt.Errorf("consumer deleted %d of %d within %s", counting.deleted.Load(), n, timeout)
	}
	elapsed := time.Since(start)
	use := m.perMessage(n)
	allocs := float64(mallocs()-mallocs0) / float64(n)
	stop()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		return runResult{}, err
	}
	counting.mu.Lock()
	returned := counting.deleteReturned
	counting.mu.Unlock()
	return runResult{rate: counting.rate(), calls: counting.snapshot(), elapsed: elapsed, used: use, allocs: allocs, deleteReturned: returned}, nil
}

// mallocs is the process's count of heap allocations so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
