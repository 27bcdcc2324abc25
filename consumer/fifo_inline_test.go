package consumer_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// goid is the id of the calling goroutine, from its stack's header
// ("goroutine 42 [running]:").
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// TestFIFODeleteSentByTheWorker: on a FIFO queue the delete batch of a
// receive's messages is sent by a worker that ran one of them (the one
// whose settle filled the batch, or whose nudge sent it), not handed to
// another goroutine: a group's next messages are handed out only once its
// received ones are deleted, and a handoff puts a wake-up between the last
// handler and that delete.
func TestFIFODeleteSentByTheWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(true, map[string]string{"VisibilityTimeout": "30"}, nil)
		const groups, perGroup = 10, 3
		for i := range perGroup {
			for g := range groups {
				f.Put(q, "m-"+strconv.Itoa(g)+"-"+strconv.Itoa(i), "g"+strconv.Itoa(g))
			}
		}
		var mu sync.Mutex
		workers := map[int64]bool{} // goroutines that ran a handler
		var deleters []int64        // the goroutine of each delete batch call
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "DeleteMessageBatch" {
				mu.Lock()
				deleters = append(deleters, goid())
				mu.Unlock()
			}
			return sqsfake.Fault{}
		})
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: groups,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
				mu.Lock()
				workers[goid()] = true
				mu.Unlock()
				return nil
			}),
		})
		if !waitUntil(time.Minute, func() bool { return len(f.Messages(q)) == 0 }) {
			t.Fatalf("%d messages left after a minute", len(f.Messages(q)))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(deleters) == 0 {
			t.Fatal("no delete batch call")
		}
		for i, id := range deleters {
			if !workers[id] {
				t.Errorf("delete batch call %d of %d made by goroutine %d, which ran no handler: handed off, not sent by the worker that completed the batch", i+1, len(deleters), id)
			}
		}
		checkProblems(t, f)
	})
}
