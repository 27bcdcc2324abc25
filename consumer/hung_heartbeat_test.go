package consumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// TestHungExtensionDoesNotHoldTheDelete (issue 42, defect 2): the
// heartbeat's extension on the last tick that could save the message
// hangs, never applied, and the handler returns while it hangs (or just
// after): the delete goes out at once, not when the hung call gives up, so
// it beats the end of the visibility and the message is handled once.
// With a 15-minute visibility the call used to be given up only after an
// interval (5m), at the visibility's end; with a 30s one, even a call
// given up on time ends with the visibility.
func TestHungExtensionDoesNotHoldTheDelete(t *testing.T) {
	for _, tc := range []struct {
		visibility string        // the queue's, seconds
		run        time.Duration // the first run's length
	}{
		{"900", 10*time.Minute + 50*time.Second}, // ticks at 5m, 10m (hangs), 15m
		{"30", 25 * time.Second},                 // ticks at 10s, 20s (hangs), 30s
	} {
		t.Run(tc.visibility+"s", func(t *testing.T) { testHungExtension(t, tc.visibility, tc.run) })
	}
}

func testHungExtension(t *testing.T, visibility string, run time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": visibility}, nil)
		f.Put(q, "slow", "")
		start := time.Now()
		secs, _ := time.ParseDuration(visibility + "s")
		visibilityEnd := start.Add(secs)

		var mu sync.Mutex
		var firstDelete, returned time.Time
		f.Inject(func(op string, _ any) sqsfake.Fault {
			switch op {
			case "ChangeMessageVisibilityBatch":
				return sqsfake.Fault{Delay: 24 * time.Hour} // hangs until its caller gives up
			case "DeleteMessageBatch", "DeleteMessage":
				mu.Lock()
				if firstDelete.IsZero() {
					firstDelete = time.Now()
				}
				mu.Unlock()
			}
			return sqsfake.Fault{}
		})
		var rc runCounter
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 1,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				rc.add(m)
				if runs, _, _ := rc.get(m.Body); runs > 1 {
					return nil
				}
				select {
				case <-time.After(run):
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				mu.Lock()
				returned = time.Now()
				mu.Unlock()
				return nil
			}),
		})
		// Well past the end of the visibility: a message whose delete came
		// too late has been received and run again by then.
		time.Sleep(2 * secs)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		runs, _, _ := rc.get("slow")
		mu.Lock()
		defer mu.Unlock()
		if runs != 1 || returned.IsZero() || firstDelete.IsZero() || !firstDelete.Before(visibilityEnd) {
			t.Errorf("first run returned at %s, first delete sent at %s; handler runs: %d; want one run, deleted before the visibility ends at %s",
				since(start, returned), since(start, firstDelete), runs, visibilityEnd.Sub(start))
		}
		if left := f.Messages(q); len(left) != 0 {
			t.Errorf("%d messages left in the queue, want none", len(left))
		}
		checkProblems(t, f)
	})
}

// since is t's offset from start, or "never" for the zero time.
func since(start, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(start).String()
}

// TestRetryDelayNotUndoneByExtension (issue 42, defect 2): a handler
// asks for a retry in 5s while the heartbeat's extension of its message is
// on its way (held 8s before SQS applies it). The retry's visibility
// change waits for that extension (a delete would not), so the extension
// cannot land after the change and undo it: the message runs again about
// 5s after its first run, not a whole visibility (30s) after the late
// extension.
func TestRetryDelayNotUndoneByExtension(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		f.Put(q, "retried", "")
		start := time.Now()
		f.Inject(func(op string, in any) sqsfake.Fault {
			if b, ok := in.(*sqs.ChangeMessageVisibilityBatchInput); ok && b.Entries[0].VisibilityTimeout == 30 {
				return sqsfake.Fault{Delay: 8 * time.Second} // the heartbeat's tick at 20s lands at 28s
			}
			return sqsfake.Fault{}
		})
		var rc runCounter
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 1,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				rc.add(m)
				if runs, _, _ := rc.get(m.Body); runs > 1 {
					return nil
				}
				select {
				case <-time.After(25 * time.Second):
				case <-ctx.Done():
					return context.Cause(ctx)
				}
				return consumer.RetryAfter(errors.New("downstream busy"), 5*time.Second)
			}),
		})
		waitUntil(2*time.Minute, func() bool { return len(f.Messages(q)) == 0 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		runs, _, at := rc.get("retried")
		if runs != 2 || at[1].Sub(start) > 45*time.Second {
			var when []string
			for _, a := range at {
				when = append(when, since(start, a))
			}
			t.Errorf("runs at %v; want two, the second 5s after the extension that was on its way landed (28s), not a visibility later", when)
		}
		checkProblems(t, f)
	})
}
