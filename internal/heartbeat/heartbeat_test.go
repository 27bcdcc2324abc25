package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/internal/heartbeat"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// queueWith makes a queue with the given visibility timeout (seconds) on
// a new fake, sends n messages and receives them all, and returns the
// fake, the queue's URL and the receipt handles in send order.
func queueWith(t *testing.T, visibility, n int) (*sqsfake.Fake, string, []string) {
	t.Helper()
	f := sqsfake.New()
	q := f.AddQueue("q", map[string]string{"VisibilityTimeout": fmt.Sprint(visibility)})
	byID := map[string]int{}
	for i := range n {
		byID[f.Put(q, fmt.Sprint(i), "")] = i
	}
	handles := make([]string, n)
	for got := 0; got < n; {
		out, err := f.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10})
		if err != nil || len(out.Messages) == 0 {
			t.Fatalf("receive: %v", err)
		}
		for _, m := range out.Messages {
			handles[byID[aws.ToString(m.MessageId)]] = aws.ToString(m.ReceiptHandle)
			got++
		}
	}
	return f, q, handles
}

// extensions returns the applied visibility changes of the fake's log.
func extensions(f *sqsfake.Fake) []sqsfake.VisibilityChange {
	var out []sqsfake.VisibilityChange
	for _, v := range f.VisibilityLog() {
		if v.Err == "" {
			out = append(out, v)
		}
	}
	return out
}

func checkProblems(t *testing.T, f *sqsfake.Fake) {
	t.Helper()
	for _, p := range f.Problems() {
		t.Errorf("SQS contract violation: %s", p)
	}
}

func TestBatchesOfTen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := queueWith(t, 30, 25)
		h := newHBOn(t, f, q, heartbeat.Config{Visibility: 30 * time.Second, Interval: 10 * time.Second})
		for _, handle := range handles {
			h.Add(handle, time.Now(), nil)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		// Ticks at 10s (not due: 20s left is not under 2 intervals), 20s (due).
		time.Sleep(15 * time.Second)
		if n := f.Calls("ChangeMessageVisibilityBatch"); n != 0 {
			t.Fatalf("%d calls before any handle was due", n)
		}
		time.Sleep(10 * time.Second)
		if n := f.Calls("ChangeMessageVisibilityBatch"); n != 3 {
			t.Fatalf("%d calls for 25 handles, want 3", n)
		}
		// Batches of at most 10 entries with distinct ids: the fake reports
		// any other as a problem.
		checkProblems(t, f)
		seen := map[string]bool{}
		for _, e := range f.VisibilityLog() {
			seen[e.Handle] = true
			if e.Seconds != 30 || e.Err != "" {
				t.Errorf("extension of %ds (error %q), want 30s applied", e.Seconds, e.Err)
			}
		}
		if len(seen) != 25 {
			t.Errorf("%d handles extended, want 25", len(seen))
		}
		// Keeps them alive: every handle extended again before each expiry.
		time.Sleep(5 * time.Minute)
		last := map[string]time.Time{}
		start := time.Now().Add(-5*time.Minute - 25*time.Second)
		for _, e := range extensions(f) {
			prev, ok := last[e.Handle]
			if !ok {
				prev = start
			}
			if e.At.Sub(prev) >= 30*time.Second {
				t.Fatalf("%s extended %s after the previous extension: it expired", e.Handle, e.At.Sub(prev))
			}
			last[e.Handle] = e.At
		}
		for _, m := range f.Messages(q) {
			if m.State != sqsfake.InFlight || m.ReceiveCount != 1 {
				t.Errorf("message %s %s, received %d times; want in flight, once", m.Body, m.State, m.ReceiveCount)
			}
		}
	})
}

func TestTwelveHourCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := queueWith(t, 600, 1)
		var lost []error
		var mu sync.Mutex
		h := newHBOn(t, f, q, heartbeat.Config{Visibility: 10 * time.Minute, Interval: 3 * time.Minute})
		received := time.Now()
		h.Add(handles[0], received, func(err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		time.Sleep(13 * time.Hour)
		cancel()
		<-done
		limit := received.Add(12 * time.Hour)
		for _, e := range f.VisibilityLog() {
			// The fake refuses (InvalidParameterValue) what SQS refuses.
			if e.Err != "" {
				t.Errorf("extension at %s refused: %s", e.At.Sub(received), e.Err)
			}
		}
		calls := extensions(f)
		if len(calls) == 0 {
			t.Fatal("no extension")
		}
		for _, e := range calls {
			until := e.At.Add(time.Duration(e.Seconds) * time.Second)
			if until.After(limit) {
				t.Errorf("extension at %s asks for visibility until %s, past the 12-hour limit %s",
					e.At.Sub(received), until.Sub(received), limit.Sub(received))
			}
		}
		last := calls[len(calls)-1]
		lastUntil := last.At.Add(time.Duration(last.Seconds) * time.Second)
		if limit.Sub(lastUntil) > 3*time.Minute {
			t.Errorf("last extension reaches %s, want close to 12h", lastUntil.Sub(received))
		}
		mu.Lock()
		defer mu.Unlock()
		if len(lost) != 1 || !errors.Is(lost[0], heartbeat.ErrMaxVisibility) {
			t.Errorf("lost callbacks %v, want one ErrMaxVisibility", lost)
		}
		if h.Len() != 0 {
			t.Errorf("%d handles still tracked after the limit", h.Len())
		}
	})
}

// TestRemoveDoesNotWaitForExtension (issue 42, defect 2): Remove,
// RemoveBatch, Detach or Suspend called while an extension that includes the
// handle hangs returns at once, so the caller's delete goes out at once.
// The delete goes through; when the hung call then reaches SQS, the
// refusal of the deleted handle is neither reported lost nor counted as a
// failure, and the other handle of the call is extended.
func TestRemoveDoesNotWaitForExtension(t *testing.T) {
	removers := map[string]func(h *heartbeat.Heartbeat, handle string){
		"Remove": func(h *heartbeat.Heartbeat, handle string) { h.Remove(handle) },
		"RemoveBatch": func(h *heartbeat.Heartbeat, handle string) {
			h.RemoveBatch([]string{"unknown", handle})
		},
		"Detach": func(h *heartbeat.Heartbeat, handle string) { h.Detach(handle) },
		"Suspend": func(h *heartbeat.Heartbeat, handle string) {
			if !h.Suspend(handle) {
				panic("Suspend = false for a tracked handle")
			}
		},
	}
	for name, remove := range removers {
		t.Run(name, func(t *testing.T) { testRemoveDoesNotWait(t, remove) })
	}
}

func testRemoveDoesNotWait(t *testing.T, remove func(h *heartbeat.Heartbeat, handle string)) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := queueWith(t, 3, 2)
		a, b := handles[0], handles[1]
		block, inCall := make(chan struct{}), make(chan struct{}, 1)
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ChangeMessageVisibilityBatch" {
				inCall <- struct{}{}
				<-block // hangs until the test lets it reach SQS
			}
			return sqsfake.Fault{}
		})
		var mu sync.Mutex
		var failures []error
		h := newHBOn(t, f, q, heartbeat.Config{
			Visibility: 3 * time.Second, Interval: time.Second,
			OnFailure: func(_ int, err error) { mu.Lock(); failures = append(failures, err); mu.Unlock() },
		})
		oa, ob := &owner{}, &owner{}
		h.AddBatch(time.Now(), time.Now(), []heartbeat.Received{{Handle: a, Owner: oa}, {Handle: b, Owner: ob}})
		tickDone := make(chan struct{})
		time.Sleep(1500 * time.Millisecond) // due: 1.5s left < 2 intervals
		go func() { h.Tick(context.Background()); close(tickDone) }()
		<-inCall // the extension is in flight

		removed := make(chan struct{})
		go func() { remove(h, a); close(removed) }()
		synctest.Wait()
		select {
		case <-removed:
		default:
			close(block)
			<-tickDone
			t.Fatal("removing the handle waits for the extension in flight")
		}
		// The settle the caller makes next: the delete goes through.
		if _, err := f.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: aws.String(a)}); err != nil {
			t.Fatal(err)
		}
		close(block)
		<-tickDone
		if err := oa.lost(); err != nil {
			t.Errorf("the deleted handle was reported lost: %v", err)
		}
		if err := ob.lost(); err != nil {
			t.Errorf("the other handle was reported lost: %v", err)
		}
		mu.Lock()
		if len(failures) != 0 {
			t.Errorf("failures reported: %v", failures)
		}
		mu.Unlock()
		if m := f.Messages(q); len(m) != 1 || m[0].State != sqsfake.InFlight {
			t.Errorf("messages left: %+v, want b only, in flight", m)
		}
		// The removed (or suspended) handle is never extended again.
		f.Inject(nil)
		for range 5 {
			time.Sleep(time.Second)
			h.Tick(context.Background())
		}
		for _, e := range f.VisibilityLog() {
			if e.Handle == a && e.Err == "" {
				t.Errorf("the deleted handle was extended: %+v", e)
			}
		}
		checkProblems(t, f)
	})
}

// TestDetachTellsWhenTheExtensionReturned: Detach stops tracking the
// handle at once; its channel is closed only once the extension in flight
// that carries the handle has returned, and at once for a handle with
// none (or not tracked).
func TestDetachTellsWhenTheExtensionReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := queueWith(t, 3, 2)
		a, b := handles[0], handles[1]
		block, inCall := make(chan struct{}), make(chan struct{}, 1)
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ChangeMessageVisibilityBatch" {
				inCall <- struct{}{}
				<-block
			}
			return sqsfake.Fault{}
		})
		h := newHBOn(t, f, q, heartbeat.Config{Visibility: 3 * time.Second, Interval: time.Second})
		h.Add(a, time.Now(), nil)
		time.Sleep(1500 * time.Millisecond) // a is due
		h.Add(b, time.Now(), nil)           // b is not
		tickDone := make(chan struct{})
		go func() { h.Tick(context.Background()); close(tickDone) }()
		<-inCall

		wa := h.Detach(a)
		if h.Tracked(a) {
			t.Error("a tracked after Detach")
		}
		select {
		case <-wa:
			t.Fatal("Detach(a)'s channel closed while a's extension is in flight")
		default:
		}
		for _, handle := range []string{b, "unknown"} {
			select {
			case <-h.Detach(handle):
			default:
				t.Errorf("Detach(%s)'s channel open with no extension of it in flight", handle)
			}
		}
		close(block)
		<-wa
		<-tickDone
		checkProblems(t, f)
	})
}

// TestHungCallIsGivenUpSoon (issue 42, defect 2): with a 15-minute
// visibility and one extension call at a time, the first call of the tick
// at 10m hangs. It is given up after DefaultCallTimeout, not after the
// 5-minute interval, so the tick's other batch still goes out well before
// the visibility ends: its handle is kept, only the hung call's handles
// are lost.
func TestHungCallIsGivenUpSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 11 // two batches
		f, q, handles := queueWith(t, 900, n)
		var hung sync.Once
		f.Inject(func(op string, _ any) sqsfake.Fault {
			ft := sqsfake.Fault{}
			if op == "ChangeMessageVisibilityBatch" {
				hung.Do(func() { ft.Delay = 24 * time.Hour }) // until the caller gives up
			}
			return ft
		})
		h := newHBOn(t, f, q, heartbeat.Config{Visibility: 15 * time.Minute, Parallel: 1})
		var mu sync.Mutex
		lost := map[string]error{}
		for _, handle := range handles {
			h.Add(handle, time.Now(), func(err error) { mu.Lock(); lost[handle] = err; mu.Unlock() })
		}
		runFor(h, 16*time.Minute)
		inFlight := 0
		for _, m := range f.Messages(q) {
			if m.State == sqsfake.InFlight {
				inFlight++
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if inFlight == 0 || inFlight+len(lost) != n {
			t.Errorf("16m on: %d of %d messages in flight, %d handles lost; want the batch that was not hung kept, the rest lost", inFlight, n, len(lost))
		}
		checkProblems(t, f)
	})
}

func TestRefusedAndExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := queueWith(t, 3, 1)
		good, bad := handles[0], "bad" // a handle the queue never issued
		var mu sync.Mutex
		lost := map[string]error{}
		failures := 0
		h := newHBOn(t, f, q, heartbeat.Config{
			Visibility: 3 * time.Second, Interval: time.Second,
			OnFailure: func(n int, err error) { mu.Lock(); failures += n; mu.Unlock() },
		})
		for _, handle := range []string{good, bad} {
			h.Add(handle, time.Now(), func(err error) { mu.Lock(); lost[handle] = err; mu.Unlock() })
		}
		time.Sleep(1500 * time.Millisecond)
		h.Tick(context.Background())
		mu.Lock()
		var ee *heartbeat.EntryError
		if !errors.As(lost[bad], &ee) || ee.Code != "ReceiptHandleIsInvalid" {
			t.Errorf("bad: lost with %v, want an EntryError ReceiptHandleIsInvalid", lost[bad])
		}
		if lost[good] != nil {
			t.Errorf("good: lost with %v", lost[good])
		}
		if failures != 1 {
			t.Errorf("OnFailure counted %d, want 1", failures)
		}
		mu.Unlock()

		// Every call fails: the handle runs out and is reported expired.
		f.Inject(func(op string, _ any) sqsfake.Fault { return sqsfake.Fault{Err: errors.New("network down")} })
		for range 6 {
			time.Sleep(time.Second)
			h.Tick(context.Background())
		}
		mu.Lock()
		defer mu.Unlock()
		if !errors.Is(lost[good], heartbeat.ErrExpired) {
			t.Errorf("good: lost with %v, want ErrExpired", lost[good])
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []heartbeat.Config{
		{Client: sqsfake.New(), QueueURL: "q"},
		{Client: sqsfake.New(), QueueURL: "q", Visibility: 10 * time.Second, Interval: 10 * time.Second},
		{Client: sqsfake.New(), Visibility: 10 * time.Second},
		{QueueURL: "q", Visibility: 10 * time.Second},
		{Client: sqsfake.New(), QueueURL: "q", Visibility: 13 * time.Hour},
	} {
		if _, err := heartbeat.New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}

// owner records what the heartbeat told it.
type owner struct {
	mu  sync.Mutex
	err error
}

func (o *owner) LeaseLost(err error) { o.mu.Lock(); o.err = err; o.mu.Unlock() }

func (o *owner) lost() error { o.mu.Lock(); defer o.mu.Unlock(); return o.err }

// TestAddBatch: handles added together are each tracked on their own: each
// extended, each owner told of its own loss, each removable.
func TestAddBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := queueWith(t, 3, 3)
		h := newHBOn(t, f, q, heartbeat.Config{Visibility: 3 * time.Second, Interval: time.Second})
		owners := []*owner{{}, {}, {}}
		start := time.Now()
		h.AddBatch(start, start, []heartbeat.Received{
			{Handle: handles[0], Owner: owners[0]},
			{Handle: "bad", Owner: owners[1]}, // a handle the queue never issued
			{Handle: handles[1], Owner: owners[2]},
			{Handle: handles[2]}, // no owner
		})
		if h.Len() != 4 {
			t.Fatalf("%d handles tracked, want 4", h.Len())
		}
		if !h.Remove(handles[1]) {
			t.Fatalf("%s not tracked", handles[1])
		}
		time.Sleep(1500 * time.Millisecond)
		h.Tick(context.Background())
		var ee *heartbeat.EntryError
		if err := owners[1].lost(); !errors.As(err, &ee) || ee.Code != "ReceiptHandleIsInvalid" {
			t.Errorf("bad: lost with %v, want an EntryError ReceiptHandleIsInvalid", err)
		}
		if owners[0].lost() != nil || owners[2].lost() != nil {
			t.Errorf("good handles lost: %v, %v", owners[0].lost(), owners[2].lost())
		}
		extended := map[string]bool{}
		for _, e := range extensions(f) {
			extended[e.Handle] = true
		}
		if !extended[handles[0]] || !extended[handles[2]] || extended[handles[1]] {
			t.Errorf("extended %v; want %s and %s, not the removed %s", extended, handles[0], handles[2], handles[1])
		}
	})
}
