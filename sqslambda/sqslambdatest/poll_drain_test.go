package sqslambdatest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
	"github.com/sqsonce/sqsonce/sqslambda"
	"github.com/sqsonce/sqsonce/sqslambda/sqslambdatest"
)

// ExampleMapping_Poll's scenario on the full SQS fake: one Poll of three
// through sqslambda deletes the ack and the dead letter, in record order,
// leaves the one to retry in flight, and the dead-letter queue holds the
// malformed one.
func TestPollOneBatchOfOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, dlq := queues(false)
		h, err := sqslambda.New(sqslambda.Config{
			Client: f,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				switch m.Body {
				case "malformed":
					return consumer.Permanent(errors.New("cannot parse the order"))
				case "busy":
					return consumer.RetryAfter(errors.New("warehouse busy"), time.Minute)
				}
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		bodies := map[string]string{} // MessageId → body
		for _, b := range []string{"order", "malformed", "busy"} {
			bodies[send(t, f, url, b, "", nil)] = b
		}
		res, err := mapping(t, f, url, h.Handle).Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		of := func(ids []string) []string {
			var out []string
			for _, id := range ids {
				out = append(out, bodies[id])
			}
			return out
		}
		if len(res.Invoked) != 3 || res.Err != nil {
			t.Errorf("%d records, whole batch failed: %v; want 3 records, no batch failure", len(res.Invoked), res.Err)
		}
		if got := of(res.Deleted); !slices.Equal(got, []string{"order", "malformed"}) {
			t.Errorf("deleted %v, want [order malformed]", got)
		}
		if got := of(res.Failed); !slices.Equal(got, []string{"busy"}) {
			t.Errorf("left to come back %v, want [busy]", got)
		}
		if s := states(f, url); len(s) != 1 || s["busy"] != sqsfake.InFlight {
			t.Errorf("queue %v, want only busy, in flight", s)
		}
		var dead []string
		for _, m := range f.Messages(dlq) {
			dead = append(dead, m.Body)
		}
		if !slices.Equal(dead, []string{"malformed"}) {
			t.Errorf("dead-lettered %v, want [malformed]", dead)
		}
	})
}

// ExampleMapping_Drain's scenario on the full SQS fake: five messages in
// batches of two, every record deleted, the queue empty, and one empty
// receive ends the drain.
func TestDrainInBatchesOfTwo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, url, _ := queues(false)
		for i := range 5 {
			send(t, f, url, fmt.Sprintf(`{"order_id":"o-%d"}`, i), "", nil)
		}
		h, err := sqslambda.New(sqslambda.Config{
			Client:  f,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error { return nil }),
		})
		if err != nil {
			t.Fatal(err)
		}
		esm := mapping(t, f, url, h.Handle, func(c *sqslambdatest.Config) { c.BatchSize = 2; c.EmptyReceives = 1 })
		results, err := esm.Drain(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range results {
			got = append(got, fmt.Sprintf("%d records, %d deleted", len(r.Invoked), len(r.Deleted)))
		}
		if want := []string{"2 records, 2 deleted", "2 records, 2 deleted", "1 records, 1 deleted"}; !slices.Equal(got, want) {
			t.Errorf("invocations %q, want %q", got, want)
		}
		if n := len(f.Messages(url)); n != 0 {
			t.Errorf("%d messages left in the queue, want 0", n)
		}
	})
}
