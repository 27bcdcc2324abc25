package sqslambda_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// stallingObserver lets the records run as far as they can before each
// lost callback that comes after the running record's: the heartbeat
// reports the handles one round found lost one at a time, and a waiting
// record must not start in between.
type stallingObserver struct {
	consumer.NopObserver
	running string

	mu       sync.Mutex
	seenLost bool
}

func (o *stallingObserver) LeaseLost(msg *consumer.Message, _ error) {
	o.mu.Lock()
	stall := o.seenLost
	if msg.ID == o.running {
		o.seenLost = true
	}
	o.mu.Unlock()
	if stall {
		synctest.Wait()
	}
}

// Every handle of the batch is refused in one heartbeat round while the
// first record runs: that record is cancelled, and none of the records
// waiting behind it starts, whatever the order in which the heartbeat
// calls their lost callbacks.
func TestLostTogetherNoWaitingRecordStarts(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFake()
				var mu sync.Mutex
				var ran []string
				h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
					mu.Lock()
					ran = append(ran, msg.ID)
					mu.Unlock()
					select {
					case <-time.After(time.Minute):
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
				obs := &stallingObserver{running: "m1"}
				a := newHandler(t, refusingSQS{fake}, h, func(c *sqslambda.Config) {
					c.Visibility = 3 * time.Second
					c.Observer = obs
				})
				var recs []events.SQSMessage
				for i := 1; i <= 10; i++ {
					recs = append(recs, rec(stdARN, fmt.Sprintf("m%d", i), "x", ""))
				}
				resp, _ := a.Handle(context.Background(), fake.event(recs...))
				if got, want := failures(resp), "m1,m2,m3,m4,m5,m6,m7,m8,m9,m10"; got != want {
					t.Errorf("batchItemFailures = %q, want %q", got, want)
				}
				mu.Lock()
				defer mu.Unlock()
				if !slices.Equal(ran, []string{"m1"}) {
					t.Errorf("ran %v, want only m1: the others lost their visibility before they started", ran)
				}
			})
		})
	}
}
