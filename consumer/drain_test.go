package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
)

// Drain handles every message that is in the queue, once, and returns
// nil once the queue stays empty; the queue is left empty.
func TestDrainReturnsWhenEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		const n = 35
		for i := range n {
			f.Put(q, fmt.Sprint(i), "")
		}
		var mu sync.Mutex
		runs := map[string]int{}
		c, err := consumer.New(consumer.Config{
			Client: f, QueueURL: q, Concurrency: 4,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				time.Sleep(50 * time.Millisecond)
				mu.Lock()
				runs[m.Body]++
				mu.Unlock()
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := c.Drain(context.Background()); err != nil {
			t.Fatalf("Drain = %v, want nil", err)
		}
		if len(runs) != n {
			t.Errorf("%d messages handled, want %d", len(runs), n)
		}
		for b, k := range runs {
			if k != 1 {
				t.Errorf("message %s handled %d times, want once", b, k)
			}
		}
		if left := len(f.Messages(q)); left != 0 {
			t.Errorf("%d messages left in the queue, want 0", left)
		}
		if d := time.Since(start); d > 2*time.Minute {
			t.Errorf("Drain returned after %s, want within a few long polls", d)
		}
		checkProblems(t, f)
	})
}

// A message still being handled keeps Drain running through empty
// receives; a context that ends first makes Drain return its error.
func TestDrainWaitsForInFlightAndHonoursCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		f.Put(q, "slow", "")
		done := false
		c, err := consumer.New(consumer.Config{
			Client: f, QueueURL: q,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				time.Sleep(3 * time.Minute) // many empty long polls meanwhile
				done = true
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Drain(context.Background()); err != nil || !done {
			t.Fatalf("Drain = %v, handler done %v; want nil after the handler finished", err, done)
		}
		if left := len(f.Messages(q)); left != 0 {
			t.Errorf("%d messages left, want 0", left)
		}

		f.Put(q, "never ends", "")
		c2, err := consumer.New(consumer.Config{
			Client: f, QueueURL: q, ShutdownTimeout: time.Second,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				<-ctx.Done()
				return context.Cause(ctx)
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c2.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Drain with a 10s context = %v, want context.DeadlineExceeded", err)
		}
	})
}
