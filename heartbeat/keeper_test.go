package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/heartbeat"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// The SDK's HTTP client of the integration test keeps idle connections
// open; their goroutines belong to net/http, not to the Keeper.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// received makes a queue with the given visibility timeout on a new fake,
// sends n messages and receives them, and returns the fake, the queue's
// URL and the receipt handles.
func received(t *testing.T, visibility, n int) (*sqsfake.Fake, string, []string) {
	t.Helper()
	f := sqsfake.New()
	q := f.AddQueue("q", map[string]string{"VisibilityTimeout": fmt.Sprint(visibility)})
	for i := range n {
		f.Put(q, fmt.Sprint(i), "")
	}
	var handles []string
	for len(handles) < n {
		out, err := f.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10})
		if err != nil || len(out.Messages) == 0 {
			t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
		}
		for _, m := range out.Messages {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
		}
	}
	return f, q, handles
}

// run starts a Keeper for q on f; the returned stop cancels its Run and
// checks what Run returned.
func run(t *testing.T, f *sqsfake.Fake, q string, cfg heartbeat.Config) (k *heartbeat.Keeper, stop func()) {
	t.Helper()
	cfg.Client, cfg.QueueURL = f, q
	k, err := heartbeat.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	return k, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v, want nil after a cancel", err)
		}
	}
}

// receiveNone fails the test when a receive on q returns a message.
func receiveNone(t *testing.T, f *sqsfake.Fake, q string) {
	t.Helper()
	out, err := f.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	for _, m := range out.Messages {
		t.Errorf("another receive got %q: the Keeper let it become visible", aws.ToString(m.Body))
	}
}

// noneLost fails the test when a lost channel has a value.
func noneLost(t *testing.T, lost ...<-chan error) {
	t.Helper()
	for i, l := range lost {
		select {
		case err := <-l:
			t.Errorf("handle %d lost: %v", i, err)
		default:
		}
	}
}

func checkProblems(t *testing.T, f *sqsfake.Fake) {
	t.Helper()
	for _, p := range f.Problems() {
		t.Errorf("SQS contract violation: %s", p)
	}
}

// TestKeptWhileWorked: messages received with a 3 s visibility and worked
// on for ten minutes are not received again meanwhile; 25 handles go out
// in calls of at most 10; after Remove and delete they are gone.
func TestKeptWhileWorked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := received(t, 3, 25)
		k, stop := run(t, f, q, heartbeat.Config{Visibility: 3 * time.Second})
		defer stop()
		var lost []<-chan error
		for _, h := range handles {
			lost = append(lost, k.Add(h, time.Now()))
		}
		for range 10 {
			time.Sleep(time.Minute)
			receiveNone(t, f, q)
		}
		noneLost(t, lost...)
		for _, m := range f.Messages(q) {
			if m.State != sqsfake.InFlight || m.ReceiveCount != 1 {
				t.Errorf("message %s %s, received %d times; want in flight, received once", m.Body, m.State, m.ReceiveCount)
			}
		}
		calls := f.Calls("ChangeMessageVisibilityBatch")
		if n := len(f.VisibilityLog()); calls == 0 || n < 25 || n > 10*calls {
			t.Errorf("%d extensions in %d calls, want at least 25, at most 10 a call", n, calls)
		}
		for _, h := range handles {
			if !k.Remove(h) {
				t.Errorf("Remove(%s) = false, want true: it was kept", h)
			}
			if _, err := f.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: aws.String(h)}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
		time.Sleep(time.Minute)
		if m := f.Messages(q); len(m) != 0 {
			t.Errorf("%d messages left after Remove and delete", len(m))
		}
		noneLost(t, lost...)
		checkProblems(t, f)
	})
}

// TestRemoveStopsExtensions: a removed handle is never extended again, so
// its message becomes visible when its visibility runs out, and its lost
// channel receives nothing; the handle kept beside it stays invisible.
func TestRemoveStopsExtensions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := received(t, 6, 2)
		removed, kept := handles[0], handles[1]
		k, stop := run(t, f, q, heartbeat.Config{Visibility: 6 * time.Second, Interval: 2 * time.Second})
		defer stop()
		lostRemoved, lostKept := k.Add(removed, time.Now()), k.Add(kept, time.Now())
		time.Sleep(30 * time.Second)
		if !k.Remove(removed) {
			t.Fatal("Remove = false for a handle kept")
		}
		if k.Remove(removed) {
			t.Error("a second Remove = true")
		}
		if k.Remove("never-added") {
			t.Error("Remove of a handle never added = true")
		}
		removedAt := time.Now()
		synctest.Wait() // an extension sent before Remove has landed
		time.Sleep(time.Minute)
		for _, v := range f.VisibilityLog() {
			if v.Handle == removed && v.At.After(removedAt) {
				t.Errorf("%s extended %s after Remove", removed, v.At.Sub(removedAt))
			}
		}
		byHandle := map[string]sqsfake.Message{}
		for _, m := range f.Messages(q) {
			byHandle[m.ReceiptHandle] = m
		}
		if m := byHandle[removed]; m.State != sqsfake.Visible {
			t.Errorf("removed message %s a minute after Remove, want visible", m.State)
		}
		if m := byHandle[kept]; m.State != sqsfake.InFlight {
			t.Errorf("kept message %s, want in flight", m.State)
		}
		noneLost(t, lostRemoved, lostKept)
		checkProblems(t, f)
	})
}

// TestRefusedHandle: a handle SQS refuses to extend is reported on its
// channel as a *RefusedError with SQS's code: one the queue never issued,
// and one whose message was deleted behind the Keeper's back. The other
// handles are still kept, and the refused ones are no longer held.
func TestRefusedHandle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := received(t, 3, 2)
		deleted, good := handles[0], handles[1]
		k, stop := run(t, f, q, heartbeat.Config{Visibility: 3 * time.Second})
		defer stop()
		lostBad := k.Add("not-a-handle-sqs-issued", time.Now())
		lostDeleted := k.Add(deleted, time.Now())
		lostGood := k.Add(good, time.Now())
		if _, err := f.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: aws.String(deleted)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		for name, l := range map[string]<-chan error{"never issued": lostBad, "deleted": lostDeleted} {
			select {
			case err := <-l:
				var refused *heartbeat.RefusedError
				if !errors.As(err, &refused) || refused.Code != "ReceiptHandleIsInvalid" {
					t.Errorf("%s: lost with %v, want a *RefusedError with code ReceiptHandleIsInvalid", name, err)
				} else if !strings.Contains(err.Error(), "ReceiptHandleIsInvalid") {
					t.Errorf("%s: error text %q does not name the code", name, err)
				}
			default:
				t.Errorf("%s: nothing on the lost channel", name)
			}
		}
		if k.Remove(deleted) {
			t.Error("Remove of a refused handle = true, want false: it is no longer held")
		}
		noneLost(t, lostGood)
		receiveNone(t, f, q)
	})
}

// TestTwelveHourCap: a handle worked on for 13 hours is kept until SQS's
// limit, never asked past it (the fake refuses what SQS refuses), and then
// reported lost with ErrMaxVisibility.
func TestTwelveHourCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := received(t, 600, 1)
		receivedAt := time.Now()
		k, stop := run(t, f, q, heartbeat.Config{Visibility: 10 * time.Minute})
		defer stop()
		lost := k.Add(handles[0], receivedAt)
		time.Sleep(11 * time.Hour)
		noneLost(t, lost)
		receiveNone(t, f, q)
		time.Sleep(2 * time.Hour)
		select {
		case err := <-lost:
			if !errors.Is(err, heartbeat.ErrMaxVisibility) {
				t.Errorf("lost with %v, want ErrMaxVisibility", err)
			}
		default:
			t.Error("nothing on the lost channel 13 hours after the receive")
		}
		limit := receivedAt.Add(12 * time.Hour)
		var last time.Time
		for _, v := range f.VisibilityLog() {
			if v.Err != "" {
				t.Errorf("extension at %s refused: %s", v.At.Sub(receivedAt), v.Err)
			}
			if until := v.At.Add(time.Duration(v.Seconds) * time.Second); until.After(last) {
				last = until
			}
		}
		if last.After(limit) || limit.Sub(last) > 15*time.Minute {
			t.Errorf("kept until %s after the receive, want close to (not past) 12h", last.Sub(receivedAt))
		}
		checkProblems(t, f)
	})
}

// TestExpired: when every extension call fails, the handle is reported
// lost with ErrExpired once its visibility has run out.
func TestExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, handles := received(t, 3, 1)
		f.Inject(func(op string, _ any) sqsfake.Fault {
			if op == "ChangeMessageVisibilityBatch" {
				return sqsfake.Fault{Err: errors.New("network down")}
			}
			return sqsfake.Fault{}
		})
		k, stop := run(t, f, q, heartbeat.Config{Visibility: 3 * time.Second})
		defer stop()
		lost := k.Add(handles[0], time.Now())
		time.Sleep(10 * time.Second)
		select {
		case err := <-lost:
			if !errors.Is(err, heartbeat.ErrExpired) {
				t.Errorf("lost with %v, want ErrExpired", err)
			}
		default:
			t.Error("nothing on the lost channel after the visibility ran out")
		}
	})
}

// TestRunOnce: a second Run while one runs returns an error at once, and
// the Keeper can run again after the first returned.
func TestRunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := received(t, 3, 0)
		k, stop := run(t, f, q, heartbeat.Config{Visibility: 3 * time.Second})
		synctest.Wait()
		if err := k.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("second Run = %v, want an error saying it is already running", err)
		}
		stop()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := k.Run(ctx); err != nil {
			t.Errorf("Run after the first returned = %v, want nil", err)
		}
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	f := sqsfake.New()
	for _, tc := range []struct {
		cfg  heartbeat.Config
		want string
	}{
		{heartbeat.Config{QueueURL: "q", Visibility: time.Second}, "Config.Client is required"},
		{heartbeat.Config{Client: f, Visibility: time.Second}, "Config.QueueURL is required"},
		{heartbeat.Config{Client: f, QueueURL: "q"}, "Config.Visibility is required"},
		{heartbeat.Config{Client: f, QueueURL: "q", Visibility: 500 * time.Millisecond}, "whole number of seconds from 1s to 12h"},
		{heartbeat.Config{Client: f, QueueURL: "q", Visibility: 1500 * time.Millisecond}, "whole number of seconds"},
		{heartbeat.Config{Client: f, QueueURL: "q", Visibility: 13 * time.Hour}, "from 1s to 12h"},
		{heartbeat.Config{Client: f, QueueURL: "q", Visibility: 30 * time.Second, Interval: 30 * time.Second}, "shorter than Visibility (30s)"},
		{heartbeat.Config{Client: f, QueueURL: "q", Visibility: 30 * time.Second, Interval: -time.Second}, "Config.Interval is -1s"},
	} {
		_, err := heartbeat.New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "heartbeat: ") {
			t.Errorf("New(%+v) = %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := heartbeat.New(heartbeat.Config{Client: f, QueueURL: "q", Visibility: 30 * time.Second}); err != nil {
		t.Errorf("New with the required fields = %v", err)
	}
}
