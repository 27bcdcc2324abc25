package settle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
)

// TestUnavailableInBothRuntimes: a handler that finds its downstream
// unavailable (consumer.Unavailable with a Retry-After of 45 s) on its
// first run is settled alike by both runtimes, MaxAttempts 1 and all: its
// first settle sets its visibility to the Retry-After (not a dead letter,
// not an attempt), and on a FIFO queue the message of its group received
// behind it is put back with the same visibility. What follows differs,
// as the runtimes do: the consumer pauses, and runs m1 again as its probe
// once the Retry-After has passed; the Lambda adapter leaves it to come
// back to a later invocation (the event source mapping's).
func TestUnavailableInBothRuntimes(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		kind := "standard"
		if fifo {
			kind = "fifo"
		}
		for _, rt := range runtimes {
			t.Run(kind+"/"+rt.name, func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					r := newRig(fifo, nil)
					r.f.Put(r.url, m1, "g")
					r.f.Put(r.url, m2, "g")
					r.maxAttempts = 1
					var mu sync.Mutex
					runs := map[string]int{}
					r.handler = consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
						mu.Lock()
						defer mu.Unlock()
						runs[nameOf(m.Body)]++
						if nameOf(m.Body) == m1 && runs[m1] == 1 {
							return consumer.Unavailable(errors.New("bank: 503 Service Unavailable"), 45*time.Second)
						}
						return nil
					})
					rt.run(t, r)

					names := map[string]string{}
					for _, s := range r.f.Sent(r.url) {
						names[s.MessageID] = nameOf(s.Body)
					}
					first := map[string]int32{}
					for _, v := range r.f.VisibilityLog() {
						n := names[v.MessageID]
						if _, ok := first[n]; !ok && v.Err == "" {
							first[n] = v.Seconds
						}
					}
					if v, ok := first[m1]; !ok || v != 45 {
						t.Errorf("m1's first settle: visibility %d (set: %v), want 45 s, its Retry-After", v, ok)
					}
					if fifo {
						if v, ok := first[m2]; !ok || v != 45 {
							t.Errorf("m2, behind m1 in its group: visibility %d (set: %v), want m1's 45 s", v, ok)
						}
					}
					if sent := r.f.Sent(r.dlq); len(sent) != 0 {
						t.Errorf("%d dead letters, want none", len(sent))
					}
					mu.Lock()
					defer mu.Unlock()
					wantM1 := 1 // Lambda: m1 comes back to a later invocation
					if rt.name == "consumer" {
						wantM1 = 2 // the consumer's probe, after the pause
					}
					if runs[m1] != wantM1 {
						t.Errorf("m1 ran %d times, want %d", runs[m1], wantM1)
					}
					for _, p := range r.f.Problems() {
						t.Errorf("SQS contract violation: %s", p)
					}
				})
			})
		}
	}
}
