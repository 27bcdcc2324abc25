package consumer_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// TestReleasedMessagesOutlastCutPolls: SQS goes on with a long poll whose
// client gave up on it (the consumer cuts its receive calls a second into
// the drain), and such a poll takes whatever becomes visible before its
// wait ends, into a response nobody reads. The messages the drain
// releases (received, never started) must not be among them: after Run
// returns every message not acked is visible, none waits out its
// visibility timeout.
func TestReleasedMessagesOutlastCutPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "300"}, nil)
		for i := range 5 {
			f.Put(q, fmt.Sprint(i), "")
		}
		f.Inject(func(op string, _ any) sqsfake.Fault {
			return sqsfake.Fault{PollOutlivesCaller: op == "ReceiveMessage"}
		})
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 2, Prefetch: 20, Receivers: 2,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				time.Sleep(3 * time.Second)
				return nil
			}),
		})
		// Two run, three wait, and the receivers long-poll the empty queue.
		time.Sleep(100 * time.Millisecond)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, m := range f.Messages(q) {
			left++
			if m.State != sqsfake.Visible {
				t.Errorf("message %s is %s after Run returned (receive count %d), want visible (released)", m.Body, m.State, m.ReceiveCount)
			}
		}
		if left != 3 {
			t.Errorf("%d messages left on the queue, want the 3 that waited", left)
		}
		checkProblems(t, f)
	})
}
