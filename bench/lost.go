package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws/middleware"
	smithymw "github.com/aws/smithy-go/middleware"
)

// A ReceiveMessage response is now and then lost after SQS handed the
// messages out: net/http closes the connection under the response when its
// request writer, running late on a busy CPU, drains the request body the
// SDK has already closed (internal/sdkhttp tells the whole race). The SDK
// retries the call, and the messages of the lost response stay invisible
// until their visibility timeout (30 s) ends. sqsonce's calls are guarded
// against it (sdkhttp.Guard), and so are the bench's clients, which the
// plain loops use (sdkhttp.GuardDrain: the race alone); a response lost any other way is still caught here. A
// run hit by it measures that wait, not the loop: it is run again, on a
// fresh queue, and counted.

// receiveRetries counts ReceiveMessage attempts beyond the first of a call,
// on every SQS client of the table.
var receiveRetries atomic.Int64

// countReceiveRetries is an SDK option that counts, in receiveRetries, the
// ReceiveMessage attempts the SDK's retryer makes after the first: a
// counter put in the call's context once per call (Initialize) is raised
// per attempt (Finalize, after the retry middleware).
func countReceiveRetries(stack *smithymw.Stack) error {
	if err := stack.Initialize.Add(smithymw.InitializeMiddlewareFunc("sqsonceBenchAttemptCounter",
		func(ctx context.Context, in smithymw.InitializeInput, next smithymw.InitializeHandler) (smithymw.InitializeOutput, smithymw.Metadata, error) {
			return next.HandleInitialize(smithymw.WithStackValue(ctx, attemptsKey{}, new(atomic.Int32)), in)
		}), smithymw.Before); err != nil {
		return err
	}
	return stack.Finalize.Add(smithymw.FinalizeMiddlewareFunc("sqsonceBenchCountReceiveRetries",
		func(ctx context.Context, in smithymw.FinalizeInput, next smithymw.FinalizeHandler) (smithymw.FinalizeOutput, smithymw.Metadata, error) {
			if n, ok := smithymw.GetStackValue(ctx, attemptsKey{}).(*atomic.Int32); ok && n.Add(1) > 1 &&
				middleware.GetOperationName(ctx) == "ReceiveMessage" {
				receiveRetries.Add(1)
			}
			return next.HandleFinalize(ctx, in)
		}), smithymw.After)
}

type attemptsKey struct{}

// maxRedo is how many times a run hit by a lost receive is run again.
const maxRedo = 3

// clean runs fn (one self-contained run: a fresh queue, its messages, the
// run) and runs it again while a receive response was lost during it, at
// most maxRedo times; b.redone counts the runs done again.
func (b *bench) clean(label string, fn func() error) error {
	for try := 0; ; try++ {
		before := receiveRetries.Load()
		if err := fn(); err != nil {
			return err
		}
		if receiveRetries.Load() == before || try == maxRedo {
			return nil
		}
		b.redone++
		fmt.Fprintf(b.errw, "bench:   %s: a ReceiveMessage response was lost (the SDK retried the call): run again\n", label)
	}
}
