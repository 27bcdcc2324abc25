package consumer_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
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

// TestFIFOOneDeletePerReceive: on a FIFO queue a backlog is received ten
// at a time and each receive's messages are deleted in one call, with one
// receiver: about one receive and one delete call per ten messages. Each
// delete unlocks the groups of the messages it carries and frees their
// slots (a FIFO message holds its slot until deleted), and the receiver
// asks for as many messages as slots are free when the workers idle.
// Three ways to fall short, all seen here before:
//   - the runner counted a message settled before its delete was queued,
//     so the batcher could see none left unsettled while the last delete
//     was still on its way, send the rest, then that one alone (110 to
//     141 receives for 1,000 messages);
//   - slots came back one by one as a batch's deletes resolved, and the
//     receiver took the first few (154 to 209 receives under -race);
//   - the batcher asked whether its op channel was empty before whether
//     any message was unsettled, so the last op could slip in between:
//     a receive's ten deletes went out as nine and one, the next receives
//     asked for nine and one, and so on (106 to 112 receives, 1 run in 13
//     under -race).
func TestFIFOOneDeletePerReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(true, map[string]string{"VisibilityTimeout": "30"}, nil)
		const groups = 1000
		for i := range groups {
			f.Put(q, "m", "g"+strconv.Itoa(i))
		}
		var handled atomic.Int64
		client := &countingClient{SQSAPI: f}
		stop := startOnFake(t, f, q, consumer.Config{
			Client:      client,
			Concurrency: 10,
			Prefetch:    consumer.NoPrefetch,
			Receivers:   1,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				handled.Add(1)
				return nil
			}),
		})
		if !waitUntil(time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
			t.Fatalf("%d of %d messages handled; %d left", handled.Load(), groups, len(f.Messages(q)))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		d, r := client.deleteBatches.Load(), client.gotMessages.Load()
		t.Logf("%d messages: %d receives returned messages, %d delete calls", groups, r, d)
		// A few more at most: a partial batch the flush interval sent (the
		// bubble's clock jumps to it whenever every goroutine waits).
		if r > groups/10+5 || d > r+2 {
			t.Errorf("%d receives returned messages and %d delete calls for %d messages: want about one each per ten", r, d, groups)
		}
		checkProblems(t, f)
	})
}
