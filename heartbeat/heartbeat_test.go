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
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/sqsonce/sqsonce/heartbeat"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type call struct {
	at      time.Time
	entries []types.ChangeMessageVisibilityBatchRequestEntry
}

// fakeAPI records ChangeMessageVisibilityBatch calls.
type fakeAPI struct {
	mu     sync.Mutex
	calls  []call
	refuse map[string]string // handle → error code
	block  chan struct{}     // when set, calls wait for it to close
	inCall chan struct{}     // when set, receives a value as each call starts
	err    error
}

func (f *fakeAPI) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if f.inCall != nil {
		f.inCall <- struct{}{}
	}
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{at: time.Now(), entries: in.Entries})
	if f.err != nil {
		return nil, f.err
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if code, ok := f.refuse[aws.ToString(e.ReceiptHandle)]; ok {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), SenderFault: true})
			continue
		}
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeAPI) snapshot() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func newHB(t *testing.T, api heartbeat.API, cfg heartbeat.Config) *heartbeat.Heartbeat {
	t.Helper()
	cfg.Client = api
	cfg.QueueURL = "https://sqs.test/1/q"
	h, err := heartbeat.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestBatchesOfTen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &fakeAPI{}
		h := newHB(t, api, heartbeat.Config{Visibility: 30 * time.Second, Interval: 10 * time.Second})
		for i := range 25 {
			h.Add(fmt.Sprintf("h%d", i), time.Now(), nil)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		// Ticks at 10s (not due: 20s left is not under 2 intervals), 20s (due).
		time.Sleep(15 * time.Second)
		if n := len(api.snapshot()); n != 0 {
			t.Fatalf("%d calls before any handle was due", n)
		}
		time.Sleep(10 * time.Second)
		calls := api.snapshot()
		if len(calls) != 3 {
			t.Fatalf("%d calls for 25 handles, want 3", len(calls))
		}
		seen := map[string]bool{}
		for _, c := range calls {
			if len(c.entries) > 10 {
				t.Errorf("call with %d entries", len(c.entries))
			}
			ids := map[string]bool{}
			for _, e := range c.entries {
				if ids[aws.ToString(e.Id)] {
					t.Errorf("duplicate entry id %s", aws.ToString(e.Id))
				}
				ids[aws.ToString(e.Id)] = true
				seen[aws.ToString(e.ReceiptHandle)] = true
				if e.VisibilityTimeout != 30 {
					t.Errorf("extension of %ds, want 30s", e.VisibilityTimeout)
				}
			}
		}
		if len(seen) != 25 {
			t.Errorf("%d handles extended, want 25", len(seen))
		}
		// Keeps them alive: every handle extended again before each expiry.
		time.Sleep(5 * time.Minute)
		last := map[string]time.Time{}
		start := time.Now().Add(-5*time.Minute - 25*time.Second)
		for _, c := range api.snapshot() {
			for _, e := range c.entries {
				h := aws.ToString(e.ReceiptHandle)
				prev, ok := last[h]
				if !ok {
					prev = start
				}
				if c.at.Sub(prev) >= 30*time.Second {
					t.Fatalf("%s extended %s after the previous extension: it expired", h, c.at.Sub(prev))
				}
				last[h] = c.at
			}
		}
	})
}

func TestTwelveHourCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &fakeAPI{}
		var lost []error
		var mu sync.Mutex
		h := newHB(t, api, heartbeat.Config{Visibility: 10 * time.Minute, Interval: 3 * time.Minute})
		received := time.Now()
		h.Add("h", received, func(err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		time.Sleep(13 * time.Hour)
		cancel()
		<-done
		limit := received.Add(12 * time.Hour)
		calls := api.snapshot()
		if len(calls) == 0 {
			t.Fatal("no extension")
		}
		for _, c := range calls {
			for _, e := range c.entries {
				until := c.at.Add(time.Duration(e.VisibilityTimeout) * time.Second)
				if until.After(limit) {
					t.Errorf("extension at %s asks for visibility until %s, past the 12-hour limit %s",
						c.at.Sub(received), until.Sub(received), limit.Sub(received))
				}
			}
		}
		lastUntil := calls[len(calls)-1].at.Add(time.Duration(calls[len(calls)-1].entries[0].VisibilityTimeout) * time.Second)
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

// TestRemoveWaitsForExtension: Remove called while an extension that
// includes the handle is in flight returns only after that call returns.
func TestRemoveWaitsForExtension(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &fakeAPI{block: make(chan struct{}), inCall: make(chan struct{}, 1)}
		h := newHB(t, api, heartbeat.Config{Visibility: 3 * time.Second, Interval: time.Second})
		h.Add("a", time.Now(), nil)
		h.Add("b", time.Now(), nil)
		tickDone := make(chan struct{})
		time.Sleep(1500 * time.Millisecond) // due: 1.5s left < 2 intervals
		go func() { h.Tick(context.Background()); close(tickDone) }()
		<-api.inCall // the extension is in flight

		removed := make(chan struct{})
		go func() { h.Remove("a"); close(removed) }()
		synctest.Wait()
		select {
		case <-removed:
			t.Fatal("Remove returned while the extension carrying the handle was in flight")
		default:
		}
		// A handle not in the in-flight call is removed at once.
		h.Add("c", time.Now(), nil)
		if !h.Remove("c") {
			t.Fatal("Remove(c) = false")
		}
		close(api.block)
		<-removed
		<-tickDone
		if h.Len() != 1 {
			t.Errorf("%d handles tracked, want 1 (b)", h.Len())
		}
		// The removed handle is never extended again.
		api.block = nil
		api.inCall = nil
		for range 5 {
			time.Sleep(time.Second)
			h.Tick(context.Background())
		}
		for _, c := range api.snapshot()[1:] {
			for _, e := range c.entries {
				if aws.ToString(e.ReceiptHandle) == "a" {
					t.Error("handle a extended after Remove returned")
				}
			}
		}
	})
}

func TestRefusedAndExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &fakeAPI{refuse: map[string]string{"bad": "ReceiptHandleIsInvalid"}}
		var mu sync.Mutex
		lost := map[string]error{}
		failures := 0
		h := newHB(t, api, heartbeat.Config{
			Visibility: 3 * time.Second, Interval: time.Second,
			OnFailure: func(n int, err error) { mu.Lock(); failures += n; mu.Unlock() },
		})
		for _, handle := range []string{"good", "bad"} {
			h.Add(handle, time.Now(), func(err error) { mu.Lock(); lost[handle] = err; mu.Unlock() })
		}
		time.Sleep(1500 * time.Millisecond)
		h.Tick(context.Background())
		mu.Lock()
		var ee *heartbeat.EntryError
		if !errors.As(lost["bad"], &ee) || ee.Code != "ReceiptHandleIsInvalid" {
			t.Errorf("bad: lost with %v, want an EntryError ReceiptHandleIsInvalid", lost["bad"])
		}
		if lost["good"] != nil {
			t.Errorf("good: lost with %v", lost["good"])
		}
		if failures != 1 {
			t.Errorf("OnFailure counted %d, want 1", failures)
		}
		mu.Unlock()

		// Every call fails: the handle runs out and is reported expired.
		api.mu.Lock()
		api.err = errors.New("network down")
		api.mu.Unlock()
		for range 6 {
			time.Sleep(time.Second)
			h.Tick(context.Background())
		}
		mu.Lock()
		defer mu.Unlock()
		if !errors.Is(lost["good"], heartbeat.ErrExpired) {
			t.Errorf("good: lost with %v, want ErrExpired", lost["good"])
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []heartbeat.Config{
		{Client: &fakeAPI{}, QueueURL: "q"},
		{Client: &fakeAPI{}, QueueURL: "q", Visibility: 10 * time.Second, Interval: 10 * time.Second},
		{Client: &fakeAPI{}, Visibility: 10 * time.Second},
		{QueueURL: "q", Visibility: 10 * time.Second},
		{Client: &fakeAPI{}, QueueURL: "q", Visibility: 13 * time.Hour},
	} {
		if _, err := heartbeat.New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}
