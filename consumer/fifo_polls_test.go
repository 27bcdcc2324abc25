package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// wakeAllSQS counts receive calls and, when herd is set, long-polls as the
// local emulator does rather than as SQS documents: a receive that finds
// nothing waits for the next delete or visibility change, then returns
// what the queue has at that moment, which is nothing for every receive
// but the first woken. SQS keeps such a poll waiting until a message
// comes or its wait ends.
type wakeAllSQS struct {
	*sqsfake.Fake
	herd     bool
	receives atomic.Int64

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each delete or visibility change
}

func newWakeAll(f *sqsfake.Fake, herd bool) *wakeAllSQS {
	return &wakeAllSQS{Fake: f, herd: herd, changed: make(chan struct{})}
}

func (w *wakeAllSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	w.receives.Add(1)
	if !w.herd || in.WaitTimeSeconds == 0 {
		return w.Fake.ReceiveMessage(ctx, in, o...)
	}
	w.mu.Lock()
	changed := w.changed
	w.mu.Unlock()
	now := *in
	now.WaitTimeSeconds = 0
	out, err := w.Fake.ReceiveMessage(ctx, &now, o...)
	if err != nil || len(out.Messages) > 0 {
		return out, err
	}
	t := time.NewTimer(time.Duration(in.WaitTimeSeconds) * time.Second)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return w.Fake.ReceiveMessage(ctx, &now, o...)
}

func (w *wakeAllSQS) wake() {
	w.mu.Lock()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

func (w *wakeAllSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	defer w.wake()
	return w.Fake.DeleteMessageBatch(ctx, in, o...)
}

func (w *wakeAllSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	defer w.wake()
	return w.Fake.DeleteMessage(ctx, in, o...)
}

func (w *wakeAllSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	defer w.wake()
	return w.Fake.ChangeMessageVisibilityBatch(ctx, in, o...)
}

// TestFIFOFewGroupsOneReceivePerBatch: a FIFO backlog of 10 groups,
// Concurrency 32. A receive takes one message of each unlocked group (or,
// as SQS may, several of one), and every group stays locked until its
// messages are deleted, so one receive call per 10 messages is all a
// drain needs, as the plain loop with one poller makes. Before, every
// full receive added a receiver: on the emulator the receive it added
// came back empty once the groups were deleted (the first receiver woken
// took them all), 2.00 receives per 10 messages. An empty receive now
// refutes the receiver added on a FIFO queue, as a short one does on a
// standard queue. Each group's messages still run in order, once.
func TestFIFOFewGroupsOneReceivePerBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		herd bool
		// runs: each group's messages sent one after another, so that a
		// receive (as SQS documents) takes several of one group.
		runs bool
	}{{"emulator", true, false}, {"sqs", false, false}, {"sqs runs of a group", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const groups, perGroup = 10, 200
				f, q, _ := onFake(true, nil, nil)
				for i := range perGroup * groups {
					g, n := i%groups, i/groups
					if tc.runs {
						g, n = i/perGroup, i%perGroup
					}
					f.Put(q, fmt.Sprintf("g%d-%03d", g, n), fmt.Sprintf("g%d", g))
				}
				w := newWakeAll(f, tc.herd)
				var mu sync.Mutex
				ran := map[string][]string{}
				var done atomic.Int64
				stop := startOnFake(t, f, q, consumer.Config{
					Client: w, Concurrency: 32, WaitTime: 2 * time.Second,
					Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
						mu.Lock()
						ran[m.GroupID] = append(ran[m.GroupID], m.Body)
						mu.Unlock()
						done.Add(1)
						return nil
					}),
				})
				if !waitUntil(time.Minute, func() bool { return done.Load() >= groups*perGroup }) {
					t.Fatalf("%d of %d messages ran", done.Load(), groups*perGroup)
				}
				receives := w.receives.Load()
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				perTen := 10 * float64(receives) / float64(groups*perGroup)
				t.Logf("%d receive calls for %d messages: %.2f per 10", receives, groups*perGroup, perTen)
				if perTen > 1.2 {
					t.Errorf("%d receive calls for %d messages: %.2f per 10, want at most 1.2", receives, groups*perGroup, perTen)
				}
				for g := range groups {
					got := ran[fmt.Sprintf("g%d", g)]
					want := make([]string, perGroup)
					for i := range want {
						want[i] = fmt.Sprintf("g%d-%03d", g, i)
					}
					if strings.Join(got, " ") != strings.Join(want, " ") {
						t.Errorf("group g%d ran %d messages out of order or more than once: %v", g, len(got), got)
					}
				}
				checkProblems(t, f)
			})
		})
	}
}
