package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// TestFIFOGroups: 20 groups × 50 messages, concurrency 16: order within
// each group, several groups at once, and a failing group neither
// reordered nor blocking the others.
func TestFIFOGroups(t *testing.T) {
	client := testenv.SQS(t)
	queueURL, _ := testenv.QueueWithDLQ(t, client, testenv.Prefix(t), testenv.QueueOptions{FIFO: true, VisibilityTimeout: 30})
	const groups, per = 20, 50
	const failing = "g07"
	// Body "gNN-MMM"; sent in order within each group, groups interleaved.
	sendN(t, client, queueURL, groups*per, func(i int) string { return fmt.Sprintf("g%02d", i%groups) })
	body := func(i int) (group string, seq int) { return fmt.Sprintf("g%02d", i%groups), i / groups }

	var mu sync.Mutex
	succeeded := map[string][]int{} // group → sequence numbers acked, in handling order
	running := map[string]bool{}
	maxGroups := 0
	failedOnce := false
	var handled atomic.Int64
	var atFailure, atRetry int64 // messages handled when the failure happened / when its retry succeeded
	c, err := consumer.New(consumer.Config{
		Client:      client,
		QueueURL:    queueURL,
		Concurrency: 16,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			n, _ := strconv.Atoi(m.Body)
			group, seq := body(n)
			if group != m.GroupID {
				t.Errorf("message %s has group %s, want %s", m.Body, m.GroupID, group)
			}
			mu.Lock()
			if running[group] {
				t.Errorf("group %s: two handlers at once", group)
			}
			running[group] = true
			maxGroups = max(maxGroups, len(running))
			fail := group == failing && seq == 10 && !failedOnce
			if fail {
				failedOnce = true
				atFailure = handled.Load()
			}
			if group == failing && seq == 10 && !fail {
				atRetry = handled.Load()
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			delete(running, group)
			if !fail {
				succeeded[group] = append(succeeded[group], seq)
			}
			mu.Unlock()
			if fail {
				return consumer.RetryAfter(errors.New("transient"), 2*time.Second)
			}
			handled.Add(1)
			return nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c)
	// While the failing group waits out its retry delay, the others go on.
	waitFor(t, 60*time.Second, "the failing group to fail", func() bool { mu.Lock(); defer mu.Unlock(); return failedOnce })
	waitFor(t, 60*time.Second, "every message handled", func() bool { return handled.Load() >= groups*per })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for g := range groups {
		group := fmt.Sprintf("g%02d", g)
		got := succeeded[group]
		if len(got) != per {
			t.Errorf("group %s: %d messages acked, want %d", group, len(got), per)
			continue
		}
		for i, seq := range got {
			if seq != i {
				t.Errorf("group %s handled out of order: %v", group, got)
				break
			}
		}
	}
	if maxGroups < 2 {
		t.Errorf("at most %d groups in flight at once, want several", maxGroups)
	}
	t.Logf("max groups in flight at once: %d; %d messages of other groups handled while %s waited out its retry", maxGroups, atRetry-atFailure, failing)
	if visible, inFlight := testenv.Count(t, client, queueURL); visible+inFlight != 0 {
		t.Errorf("queue still holds %d visible + %d in flight", visible, inFlight)
	}
	if atRetry-atFailure < 50 {
		t.Errorf("only %d messages of other groups were handled while %s waited out its retry: the failure blocked them", atRetry-atFailure, failing)
	}
}
