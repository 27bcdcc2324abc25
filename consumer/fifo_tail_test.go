package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// The tests below put two messages, head and tail, in one FIFO group: the
// fake, as SQS, returns them in one receive (fauxqs returns one message
// of a group per receive, so they run on the fake only). Every retry of
// head used to release tail with visibility 0: a receive in which tail
// did not run, counted by SQS all the same.

// tailBackoff is a backoff whose delay is always its ceiling: 1s, 2s, 4s...
var tailBackoff = consumer.Backoff{Base: time.Second, RandFunc: func(n int64) int64 { return n - 1 }}

// fifoTailRedrive is a RedrivePolicy sending to orders-dlq.fifo after n
// receives.
func fifoTailRedrive(n int) string {
	return fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq.fifo","maxReceiveCount":"%d"}`, n)
}

// deadLetters names the messages in the DLQ: those SQS moved there by the
// queue's maxReceiveCount, and those the consumer sent with their failure.
func deadLetters(t *testing.T, f *sqsfake.Fake, dlq string) (moved, sent []string, failures map[string]deadletter.Failure) {
	t.Helper()
	failures = map[string]deadletter.Failure{}
	for _, s := range f.Sent(dlq) {
		if s.MovedFrom != "" {
			moved = append(moved, s.Body)
			continue
		}
		sent = append(sent, s.Body)
		if fl, ok := deadletter.ParseFailure(s.Attributes); ok {
			failures[s.Body] = fl
		}
	}
	return moved, sent, failures
}

// TestFIFORetriedHeadDoesNotBurnItsTail (issue 42, defect 4): head fails
// every time, tail would ack; the queue's maxReceiveCount is 3 and the
// consumer has no MaxAttempts. tail is received with each of head's
// three runs. Before, SQS moved both to the DLQ on the fourth receive:
// tail never ran. Now the consumer dead-letters head itself on its last
// receive (a message behind it has reached maxReceiveCount), and tail
// runs in that same receive.
func TestFIFORetriedHeadDoesNotBurnItsTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(true, map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": fifoTailRedrive(3)}, nil)
		f.Put(q, "head", "g")
		f.Put(q, "tail", "g")
		var rc runCounter
		stop := startOnFake(t, f, q, consumer.Config{
			Backoff: tailBackoff,
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				rc.add(m)
				if m.Body == "head" {
					return errors.New("downstream refuses head")
				}
				return nil
			}),
		})
		waitUntil(10*time.Minute, func() bool { return len(f.Messages(q)) == 0 })
		time.Sleep(time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		headRuns, _, _ := rc.get("head")
		tailRuns, _, _ := rc.get("tail")
		moved, sent, failures := deadLetters(t, f, dlq)
		t.Logf("head ran %d times; tail ran %d times; moved to DLQ by SQS: %v; dead-lettered by the consumer: %v", headRuns, tailRuns, moved, sent)
		if headRuns != 3 || tailRuns != 1 || len(moved) != 0 || !slices.Equal(sent, []string{"head"}) {
			t.Errorf("head ran %d times; tail ran %d times; moved to DLQ by SQS: %v; dead-lettered by the consumer: %v; "+
				"want 3, 1, none, [head]", headRuns, tailRuns, moved, sent)
		}
		if fl := failures["head"]; fl.Class != consumer.ClassMaxAttempts || fl.Attempts != 3 {
			t.Errorf("head's dead letter records class %q, %d attempts; want %q, 3", fl.Class, fl.Attempts, consumer.ClassMaxAttempts)
		}
		if left := f.Messages(q); len(left) != 0 {
			t.Errorf("left on the queue: %+v", left)
		}
		checkProblems(t, f)
	})
}

// TestFIFOTailAttemptsCountItsOwnRuns (issue 42, defect 4): MaxAttempts 3;
// head fails every time and is dead-lettered on its third run; tail fails
// on its first run and acks on its second. tail was received with each of
// head's runs; those receives are not its attempts. Before, tail's first
// failure came at ApproximateReceiveCount 4 and dead-lettered it at once.
func TestFIFOTailAttemptsCountItsOwnRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(true, map[string]string{"VisibilityTimeout": "30"}, nil)
		f.Put(q, "head", "g")
		f.Put(q, "tail", "g")
		var rc runCounter
		var mu sync.Mutex
		attempts := map[string][]int{}
		stop := startOnFake(t, f, q, consumer.Config{
			Backoff:     tailBackoff,
			MaxAttempts: 3,
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				rc.add(m)
				mu.Lock()
				attempts[m.Body] = append(attempts[m.Body], m.Attempt())
				mu.Unlock()
				if runs, _, _ := rc.get(m.Body); m.Body == "head" || runs == 1 {
					return fmt.Errorf("%s: downstream busy", m.Body)
				}
				return nil
			}),
		})
		waitUntil(10*time.Minute, func() bool { return len(f.Messages(q)) == 0 })
		time.Sleep(time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		headRuns, _, _ := rc.get("head")
		tailRuns, _, _ := rc.get("tail")
		moved, sent, failures := deadLetters(t, f, dlq)
		t.Logf("head ran %d times; tail ran %d times; dead-lettered by the consumer: %v; moved by SQS: %v", headRuns, tailRuns, sent, moved)
		if headRuns != 3 || tailRuns != 2 || !slices.Equal(sent, []string{"head"}) || len(moved) != 0 {
			t.Errorf("head ran %d times; tail ran %d times; dead-lettered by the consumer: %v (tail's failure: %+v); moved by SQS: %v; "+
				"want 3, 2, [head], none", headRuns, tailRuns, sent, failures["tail"], moved)
		}
		if fl := failures["head"]; fl.Attempts != 3 {
			t.Errorf("head's dead letter records %d attempts, want 3", fl.Attempts)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(attempts["head"], []int{1, 2, 3}) || !slices.Equal(attempts["tail"], []int{1, 2}) {
			t.Errorf("Message.Attempt seen by the handler: head %v, tail %v; want [1 2 3] and [1 2]", attempts["head"], attempts["tail"])
		}
		checkProblems(t, f)
	})
}

// TestFIFOTailHeldWithItsHeadsRetry (issue 42, defect 4): head asks for a
// retry in a minute; tail, received with it, did not run and is kept
// invisible for that same minute (not released with visibility 0), so
// the group comes back together, head first.
func TestFIFOTailHeldWithItsHeadsRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(true, map[string]string{"VisibilityTimeout": "30"}, nil)
		head := f.Put(q, "head", "g")
		tail := f.Put(q, "tail", "g")
		var rc runCounter
		stop := startOnFake(t, f, q, consumer.Config{
			Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
				rc.add(m)
				if runs, _, _ := rc.get(m.Body); m.Body == "head" && runs == 1 {
					return consumer.RetryAfter(errors.New("not yet"), time.Minute)
				}
				return nil
			}),
		})
		waitUntil(10*time.Minute, func() bool { return len(f.Messages(q)) == 0 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		vis := map[string][]int32{}
		for _, v := range f.VisibilityLog() {
			if v.Err != "" {
				t.Errorf("visibility change of %s refused: %s", v.MessageID, v.Err)
			}
			vis[v.MessageID] = append(vis[v.MessageID], v.Seconds)
		}
		t.Logf("head's visibility set to %v, tail's to %v", vis[head], vis[tail])
		if !slices.Equal(vis[head], []int32{60}) || !slices.Equal(vis[tail], []int32{60}) {
			t.Errorf("head's visibility set to %v, tail's to %v; want [60] and [60]", vis[head], vis[tail])
		}
		rc.mu.Lock()
		order := slices.Clone(rc.order)
		rc.mu.Unlock()
		if !slices.Equal(order, []string{"head", "head", "tail"}) {
			t.Errorf("runs %v, want [head head tail]", order)
		}
		if _, count, _ := rc.get("tail"); count != 2 {
			t.Errorf("tail ran at receive count %d, want 2: received with head's retry", count)
		}
		checkProblems(t, f)
	})
}
