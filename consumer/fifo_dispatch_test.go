package consumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
)

// slowReceived holds the receiver in Received of the message named late
// until the message named first has settled, or a second has passed: the
// receiver is then slow to hand out the rest of a receive.
type slowReceived struct {
	consumer.NopObserver
	first, late string
	settled     chan struct{}
	once        sync.Once
}

func (o *slowReceived) Received(m *consumer.Message) {
	if m.Body == o.late {
		select {
		case <-o.settled:
		case <-time.After(time.Second):
		}
	}
}

func (o *slowReceived) Settled(m *consumer.Message, _ consumer.Result) {
	if m.Body == o.first {
		o.once.Do(func() { close(o.settled) })
	}
}

// TestFIFOLaterMessageOfAReceiveWaits: m1 and m2 of one group come in one
// receive; m1 fails and is retried in a minute. m2 must not run before m1
// has run again, however fast m1's worker is compared with the receiver
// handing out m2. Before, the receiver gave out a receive's messages one
// at a time: a worker could finish m1, find its group's lane empty and
// drop it, and m2 then started in a new lane, ahead of m1.
func TestFIFOLaterMessageOfAReceiveWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(true, map[string]string{"VisibilityTimeout": "30"}, nil)
		f.Put(q, "m1", "g")
		f.Put(q, "m2", "g")
		var mu sync.Mutex
		var order []string
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 2,
			Observer:    &slowReceived{first: "m1", late: "m2", settled: make(chan struct{})},
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				mu.Lock()
				order = append(order, m.Body)
				first := len(order) == 1
				mu.Unlock()
				if m.Body == "m1" && first {
					return consumer.RetryAfter(errors.New("not yet"), time.Minute)
				}
				return nil
			}),
		})
		time.Sleep(3 * time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(order) < 3 || order[0] != "m1" || order[1] != "m1" || order[2] != "m2" {
			t.Errorf("handler runs %v, want [m1 m1 m2]: m2 waits for m1's retry", order)
		}
		checkProblems(t, f)
	})
}
