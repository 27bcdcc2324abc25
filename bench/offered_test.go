package main

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestProducerFailureEndsRun: a producer that cannot start sending (here a
// command that exits at once with an error) ends the run's wait for its
// messages with the producer's error, instead of the 10-minute timeout.
func TestProducerFailureEndsRun(t *testing.T) {
	client := testenv.SQS(t)
	e, err := newEnv(context.Background(), client, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.cleanup()
	b := &bench{ctx: context.Background(), client: client, env: e, errw: io.Discard}
	start := time.Now()
	runErr := errors.New("run returned without its context ending")
	err = b.withProducer("false", 100, "producer-fails", func(ctx context.Context, q string) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Minute):
			return runErr
		}
	})
	if err == nil || errors.Is(err, runErr) || time.Since(start) > 30*time.Second {
		t.Fatalf("withProducer returned %v after %s, want the producer's error at once", err, time.Since(start))
	}
	t.Log(err)
}
