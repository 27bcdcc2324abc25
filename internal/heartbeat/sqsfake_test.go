package heartbeat_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsonce/sqsonce/internal/heartbeat"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// receiveOne long-polls q on f for one message and returns its handle and
// the times the call was made and returned.
func receiveOne(t *testing.T, f *sqsfake.Fake, q string, wait int32) (handle string, called, returned time.Time) {
	t.Helper()
	called = time.Now()
	out, err := f.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 1, WaitTimeSeconds: wait})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
	}
	return aws.ToString(out.Messages[0].ReceiptHandle), called, time.Now()
}

// newHBOn returns a heartbeat for queue q of f.
func newHBOn(t *testing.T, f *sqsfake.Fake, q string, cfg heartbeat.Config) *heartbeat.Heartbeat {
	t.Helper()
	cfg.Client = f
	cfg.QueueURL = q
	h, err := heartbeat.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// runFor runs h's ticker for d.
func runFor(h *heartbeat.Heartbeat, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = h.Run(ctx)
}

// TestAddReceivedCountsFromResponse (issue 10, defect 7): a message that
// arrives 19s into a 20s long poll on a queue with a 5s visibility is kept
// invisible when its visibility is counted from the response; counted from
// the call, it is declared expired at the first tick.
func TestAddReceivedCountsFromResponse(t *testing.T) {
	for _, fromResponse := range []bool{true, false} {
		name := "from the response"
		if !fromResponse {
			name = "from the call"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := sqsfake.New()
				q := f.AddQueue("q", map[string]string{"VisibilityTimeout": "5"})
				go func() {
					time.Sleep(19 * time.Second)
					f.Put(q, "late", "")
				}()
				handle, called, returned := receiveOne(t, f, q, 20)
				h := newHBOn(t, f, q, heartbeat.Config{Visibility: 5 * time.Second})
				var mu sync.Mutex
				var lost error
				onLost := func(err error) { mu.Lock(); lost = err; mu.Unlock() }
				if fromResponse {
					h.AddReceived(handle, called, returned, onLost)
				} else {
					h.Add(handle, called, onLost)
				}
				runFor(h, time.Minute)
				mu.Lock()
				defer mu.Unlock()
				m := f.Messages(q)[0]
				if fromResponse && (lost != nil || m.State != sqsfake.InFlight || m.ReceiveCount != 1) {
					t.Errorf("lost %v, message %s with receive count %d; want kept in flight, received once", lost, m.State, m.ReceiveCount)
				}
				if !fromResponse && !errors.Is(lost, heartbeat.ErrExpired) {
					t.Errorf("counted from the call: lost %v, want ErrExpired (the behaviour AddReceived fixes)", lost)
				}
				for _, p := range f.Problems() {
					t.Error(p)
				}
			})
		})
	}
}

// TestSuspendResume: a suspended handle is neither extended nor reported
// lost, however long; Suspend returns at once while an extension is in
// flight (TestRemoveDoesNotWaitForExtension); Resume hands the handle
// back (reported expired at the next tick if its visibility ran out
// meanwhile, extended otherwise).
func TestSuspendResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", map[string]string{"VisibilityTimeout": "6"})
		f.Put(q, "a", "")
		f.Put(q, "b", "")
		ha, called, returned := receiveOne(t, f, q, 0)
		hb, _, _ := receiveOne(t, f, q, 0)
		h := newHBOn(t, f, q, heartbeat.Config{Visibility: 6 * time.Second, Interval: 2 * time.Second})
		var mu sync.Mutex
		lost := map[string]error{}
		for _, handle := range []string{ha, hb} {
			h.AddReceived(handle, called, returned, func(err error) { mu.Lock(); lost[handle] = err; mu.Unlock() })
		}
		if h.Suspend("unknown") {
			t.Error("Suspend of an unknown handle = true")
		}

		// An extension of a is in flight: Suspend returns at once, and the
		// extension, applied after, changes nothing for the heartbeat.
		inCall, release := make(chan struct{}), make(chan struct{})
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ChangeMessageVisibilityBatch" {
				close(inCall)
				<-release
			}
			return sqsfake.Fault{}
		})
		time.Sleep(2500 * time.Millisecond) // both due: 3.5s left < 2 intervals
		tickDone := make(chan struct{})
		go func() { h.Tick(context.Background()); close(tickDone) }()
		<-inCall
		if !h.Suspend(ha) {
			t.Fatal("Suspend(a) = false, want true")
		}
		close(release)
		<-tickDone
		f.Inject(nil)

		// Suspended for a minute: a is neither extended nor lost; b is kept.
		ctx, cancel := context.WithCancel(context.Background())
		running := make(chan struct{})
		go func() { _ = h.Run(ctx); close(running) }()
		defer func() { cancel(); <-running }()
		time.Sleep(time.Minute)
		mu.Lock()
		if len(lost) != 0 {
			t.Errorf("lost %v while a was suspended", lost)
		}
		mu.Unlock()
		byID := map[string]sqsfake.Message{}
		for _, m := range f.Messages(q) {
			byID[m.Body] = m
		}
		if byID["a"].State != sqsfake.Visible || byID["b"].State != sqsfake.InFlight {
			t.Errorf("a %s, b %s; want a visible (not extended), b in flight", byID["a"].State, byID["b"].State)
		}
		// Resumed after its visibility ran out: reported expired.
		if !h.Resume(ha) {
			t.Fatal("Resume(a) = false")
		}
		time.Sleep(3 * time.Second)
		mu.Lock()
		if !errors.Is(lost[ha], heartbeat.ErrExpired) || lost[hb] != nil {
			t.Errorf("lost %v, want a expired and b kept", lost)
		}
		mu.Unlock()
		// Suspended and resumed in time: b is extended again.
		if !h.Suspend(hb) || !h.Resume(hb) {
			t.Fatal("Suspend/Resume(b) = false")
		}
		time.Sleep(time.Minute)
		if m := f.Messages(q); len(m) != 2 || m[1].State != sqsfake.InFlight || m[1].ReceiveCount != 1 {
			t.Errorf("b after resume: %+v, want in flight, received once", m)
		}
		for _, p := range f.Problems() {
			t.Error(p)
		}
	})
}

// TestAddedLateIsExtendedAtOnce (issue 42, defect 3): handles whose
// visibility began 25s before they were added, on a queue with a 30s
// visibility (the first tick would come 10s on, too late): one added
// with AddDue (its last receive not known), one with Add dated from its
// receive. Run extends both at once, so they stay in flight for a minute,
// received once; a due handle whose visibility had already ended is
// reported lost, not kept.
func TestAddedLateIsExtendedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := sqsfake.New()
		q := f.AddQueue("q", map[string]string{"VisibilityTimeout": "30"})
		f.Put(q, "gone", "")
		gone, _, _ := receiveOne(t, f, q, 0)
		time.Sleep(10 * time.Second)
		f.Put(q, "due", "")
		due, _, _ := receiveOne(t, f, q, 0)
		f.Put(q, "dated", "")
		dated, receivedAt, _ := receiveOne(t, f, q, 0)
		time.Sleep(25 * time.Second) // gone's visibility has ended; 5s left for the others

		h := newHBOn(t, f, q, heartbeat.Config{Visibility: 30 * time.Second})
		var mu sync.Mutex
		lost := map[string]error{}
		onLost := func(handle string) func(error) {
			return func(err error) { mu.Lock(); lost[handle] = err; mu.Unlock() }
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		running := make(chan struct{})
		go func() { _ = h.Run(ctx); close(running) }()
		h.AddDue(due, time.Now(), onLost(due))
		h.Add(dated, receivedAt, onLost(dated))
		h.AddDue(gone, time.Now(), onLost(gone))
		<-running

		mu.Lock()
		defer mu.Unlock()
		var ee *heartbeat.EntryError
		if len(lost) != 1 || !errors.As(lost[gone], &ee) {
			t.Errorf("lost %v; want only the handle whose visibility had ended, refused", lost)
		}
		for _, m := range f.Messages(q) {
			if m.Body != "gone" && (m.State != sqsfake.InFlight || m.ReceiveCount != 1) {
				t.Errorf("%s: %s, received %d times; want in flight, received once", m.Body, m.State, m.ReceiveCount)
			}
		}
		for _, p := range f.Problems() {
			t.Error(p)
		}
	})
}
