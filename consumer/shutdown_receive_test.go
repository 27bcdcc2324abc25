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

// TestReceiveInFlightAtShutdownIsReleased: SQS hands out a receive's
// messages before its response arrives. A receive still in flight when the
// consumer stops must be let return and its messages released, not
// cancelled: a cancelled call loses the response and the messages stay
// invisible for their whole visibility timeout.
func TestReceiveInFlightAtShutdownIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "300"}, nil)
		for i := range 200 {
			f.Put(q, fmt.Sprint(i), "")
		}
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ReceiveMessage" {
				return sqsfake.Fault{ResponseDelay: 300 * time.Millisecond}
			}
			return sqsfake.Fault{}
		})
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 10,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				time.Sleep(time.Millisecond)
				return nil
			}),
		})
		time.Sleep(100 * time.Millisecond) // the first receives are in flight, their messages handed out
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for _, m := range f.Messages(q) {
			if m.State != sqsfake.Visible {
				t.Errorf("message %s is %s after Run returned, want visible (released)", m.Body, m.State)
			}
		}
		checkProblems(t, f)
	})
}
