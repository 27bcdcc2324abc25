package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// TestFIFOLanesSeveralPerGroup: real SQS returns several messages of one
// group in one receive. Handlers of a group never overlap and run in
// order; after a failure the group's later received messages are released,
// not run.
func TestFIFOLanesSeveralPerGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(true, map[string]string{"VisibilityTimeout": "30"}, nil)
		const groups, per = 4, 12
		for i := range per {
			for g := range groups {
				f.Put(q, fmt.Sprintf("g%d-%02d", g, i), fmt.Sprintf("g%d", g))
			}
		}
		var mu sync.Mutex
		running := map[string]int{}
		ran := map[string][]string{}
		maxGroupsAtOnce := 0
		failed := false
		released := 0
		obs := &recordingObserver{onSettled: func(m *consumer.Message, r consumer.Result) {
			if r.Outcome == consumer.OutcomeRelease {
				mu.Lock()
				released++
				mu.Unlock()
			}
		}}
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 4,
			Prefetch:    20, // receives of 10: several messages of a group per receive
			Receivers:   1,  // the first receive holds g1-00, g1-01 and g1-02
			Observer:    obs,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				mu.Lock()
				running[m.GroupID]++
				if running[m.GroupID] > 1 {
					t.Errorf("group %s: %d handlers at once", m.GroupID, running[m.GroupID])
				}
				busy := 0
				for _, n := range running {
					if n > 0 {
						busy++
					}
				}
				maxGroupsAtOnce = max(maxGroupsAtOnce, busy)
				ran[m.GroupID] = append(ran[m.GroupID], m.Body)
				fail := m.Body == "g1-00" && !failed
				if fail {
					failed = true
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				running[m.GroupID]--
				mu.Unlock()
				if fail {
					return consumer.RetryAfter(errors.New("transient"), 2*time.Second)
				}
				return nil
			}),
		})
		for len(f.Messages(q)) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for g := range groups {
			var want []string
			for i := range per {
				want = append(want, fmt.Sprintf("g%d-%02d", g, i))
				if g == 1 && i == 0 {
					want = append(want, "g1-00") // failed once, then ran again
				}
			}
			if got := ran[fmt.Sprintf("g%d", g)]; strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("group g%d ran %v, want %v", g, got, want)
			}
		}
		if maxGroupsAtOnce < 2 {
			t.Errorf("at most %d groups ran at once, want several", maxGroupsAtOnce)
		}
		if released == 0 {
			t.Errorf("no message was released after g1-00 failed; its group's later messages in the batch should have been")
		}
		if n := f.Calls("ReceiveMessage"); n >= groups*per {
			t.Errorf("%d receives for %d messages: receives did not return several messages", n, groups*per)
		}
		checkProblems(t, f)
	})
}

// recordingObserver records settles.
type recordingObserver struct {
	consumer.NopObserver
	onSettled func(*consumer.Message, consumer.Result)
	mu        sync.Mutex
	outcomes  map[consumer.Outcome]int
	received  int
	lost      []error
	hbFailed  int
	// settleFailed and refused count SettleFailed and DeadLetterRefused.
	settleFailed, refused int
}

func (o *recordingObserver) SettleFailed(*consumer.Message, string, error) {
	o.mu.Lock()
	o.settleFailed++
	o.mu.Unlock()
}

func (o *recordingObserver) DeadLetterRefused(*consumer.Message, error) {
	o.mu.Lock()
	o.refused++
	o.mu.Unlock()
}

func (o *recordingObserver) counts() (settleFailed, refused, lost int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.settleFailed, o.refused, len(o.lost)
}

func (o *recordingObserver) Received(*consumer.Message) {
	o.mu.Lock()
	o.received++
	o.mu.Unlock()
}

func (o *recordingObserver) Settled(m *consumer.Message, r consumer.Result) {
	o.mu.Lock()
	if o.outcomes == nil {
		o.outcomes = map[consumer.Outcome]int{}
	}
	o.outcomes[r.Outcome]++
	o.mu.Unlock()
	if o.onSettled != nil {
		o.onSettled(m, r)
	}
}

func (o *recordingObserver) LeaseLost(_ *consumer.Message, err error) {
	o.mu.Lock()
	o.lost = append(o.lost, err)
	o.mu.Unlock()
}

func (o *recordingObserver) HeartbeatFailed(n int, _ error) {
	o.mu.Lock()
	o.hbFailed += n
	o.mu.Unlock()
}

func (o *recordingObserver) count(out consumer.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcomes[out]
}

func (o *recordingObserver) receivedCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.received
}

// TestFIFOShutdownReleasesLanes: on shutdown the messages no worker has
// started are released at once, both those waiting in a lane behind their
// group's running handler and, with more groups than workers, those of
// groups waiting in the ready queue; running handlers are cancelled with
// ErrShutdown at ShutdownTimeout and their messages released too.
func TestFIFOShutdownReleasesLanes(t *testing.T) {
	for _, c := range []struct {
		name                  string
		groups, each          int // messages: groups × each
		concurrency, prefetch int
		received, waiting     int // held at shutdown; of them not started
	}{
		{"behind running handlers", 3, 5, 3, 12, 10, 7},
		{"in the ready queue", 4, 2, 2, 8, 8, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			testFIFOShutdown(t, c.groups, c.each, c.concurrency, c.prefetch, c.received, c.waiting)
		})
	}
}

func testFIFOShutdown(t *testing.T, groups, each, concurrency, prefetch, received, waiting int) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(true, map[string]string{"VisibilityTimeout": "30"}, nil)
		for i := range each {
			for g := range groups {
				f.Put(q, fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("g%d", g))
			}
		}
		obs := &recordingObserver{}
		var mu sync.Mutex
		var causes []error
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: concurrency, Prefetch: prefetch, Receivers: 1,
			ShutdownTimeout: 10 * time.Second,
			Observer:        obs,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				<-ctx.Done()
				mu.Lock()
				causes = append(causes, context.Cause(ctx))
				mu.Unlock()
				return ctx.Err()
			}),
		})
		for obs.receivedCount() < received {
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		start := time.Now()
		errc := make(chan error, 1)
		go func() { errc <- stop() }()
		time.Sleep(time.Second)
		if got := obs.count(consumer.OutcomeRelease); got != waiting {
			t.Errorf("%d released one second into the drain, want the %d not started", got, waiting)
		}
		err := <-errc
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("drain took %s, want the 10s ShutdownTimeout", d)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(causes) != concurrency {
			t.Fatalf("%d handlers cancelled, want %d", len(causes), concurrency)
		}
		for _, c := range causes {
			if !errors.Is(c, consumer.ErrShutdown) {
				t.Errorf("cause %v, want ErrShutdown", c)
			}
		}
		for _, m := range f.Messages(q) {
			if m.State != sqsfake.Visible {
				t.Errorf("%s still %s after the drain", m.Body, m.State)
			}
		}
		if n := len(f.Messages(q)); n != groups*each {
			t.Errorf("%d messages left, want all %d", n, groups*each)
		}
	})
}

func (o *recordingObserver) lostCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.lost)
}
