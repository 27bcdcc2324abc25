package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/internal/delivery"
)

func message(id, key, body string) *consumer.Message {
	m := delivery.New(types.Message{MessageId: aws.String(id), Body: aws.String(body)}, "queue", time.Now())
	delivery.SetKey(m, key)
	return m
}

// received is message on its receives-th delivery.
func received(id, key, body string, receives int) *consumer.Message {
	m := delivery.New(types.Message{MessageId: aws.String(id), Body: aws.String(body),
		Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receives)}}, "queue", time.Now())
	delivery.SetKey(m, key)
	return m
}

type fixture struct {
	clock *dedupetest.Clock
	store *dedupe.Memory
	runs  int
	err   error // what the handler returns
	h     consumer.Handler
	logs  *observer.ObservedLogs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{clock: dedupetest.NewClock(time.Unix(1_800_000_000, 0))}
	f.store = dedupe.NewMemory(dedupe.MemoryConfig{Namespace: "mw", NowFunc: f.clock.Now})
	core, logs := observer.New(zapcore.DebugLevel)
	f.logs = logs
	mw := wrap(t, f.store, dedupe.Config{Lease: 30 * time.Second, Logger: zap.New(core), NowFunc: f.clock.Now})
	f.h = consumer.Chain(consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		f.runs++
		return f.err
	}), mw)
	return f
}

func TestMiddlewareDuplicateSkipsHandler(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.h.Handle(ctx, message("m1", "k1", "body")); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	err := f.h.Handle(ctx, message("m2", "k1", "body"))
	if !errors.Is(err, consumer.ErrDuplicate) {
		t.Fatalf("second delivery: %v, want ErrDuplicate", err)
	}
	if f.runs != 1 {
		t.Fatalf("handler ran %d times, want 1", f.runs)
	}
}

func TestMiddlewareFailureReleases(t *testing.T) {
	t.Parallel()
	for name, herr := range map[string]error{
		"transient": errors.New("boom"),
		"permanent": consumer.Permanent(errors.New("bad input")),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			f.err = herr
			if err := f.h.Handle(ctx, message("m1", "k1", "body")); !errors.Is(err, herr) {
				t.Fatalf("handler error not returned unchanged: %v", err)
			}
			// Released: the retry (or a redrive) runs at once, without
			// waiting for the lease.
			f.err = nil
			if err := f.h.Handle(ctx, message("m1", "k1", "body")); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if f.runs != 2 {
				t.Fatalf("handler ran %d times, want 2", f.runs)
			}
			if err := f.h.Handle(ctx, message("m1", "k1", "body")); !errors.Is(err, consumer.ErrDuplicate) {
				t.Fatalf("after success: %v, want ErrDuplicate", err)
			}
		})
	}
}

// TestMiddlewareInProgressRechecksSoon: a delivery that finds its key held
// by another owner is retried after a second on its first receive (capped
// by the other owner's remaining lease), and after the rest of that lease
// on later receives: rechecks that grew from 1 s spent a crashed owner's
// message's receives (5 within 34 s) before its 60 s lease ended, and SQS
// moved it to the dead-letter queue unread. Once the lease ends it takes
// over.
func TestMiddlewareInProgressRechecksSoon(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// Another worker holds the key.
	if _, err := f.store.Claim(ctx, "k1", dedupe.Fingerprint("body"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Second) // 15 s of the other owner's lease left
	for _, tc := range []struct {
		receives int
		want     time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 15 * time.Second}, {3, 15 * time.Second}, {60, 15 * time.Second}} {
		err := f.h.Handle(ctx, received("m1", "k1", "body", tc.receives))
		var re *consumer.RetryError
		if !errors.As(err, &re) || re.Delay != tc.want {
			t.Fatalf("in progress, receive %d: %v, want RetryAfter %s", tc.receives, err, tc.want)
		}
		var ip *dedupe.InProgressError
		if !errors.As(err, &ip) {
			t.Fatalf("in progress: %v, want an InProgressError in the chain", err)
		}
	}
	if f.runs != 0 {
		t.Fatalf("handler ran while another owner held the key")
	}
	// Never less than a second, SQS's smallest delay.
	f.clock.Advance(14*time.Second + 900*time.Millisecond)
	var re *consumer.RetryError
	if err := f.h.Handle(ctx, received("m1", "k1", "body", 9)); !errors.As(err, &re) || re.Delay != time.Second {
		t.Fatalf("in progress, 100ms of lease left: %v, want RetryAfter 1s", err)
	}
	// After the other owner's lease, this delivery takes over.
	f.clock.Advance(time.Second)
	if err := f.h.Handle(ctx, message("m1", "k1", "body")); err != nil || f.runs != 1 {
		t.Fatalf("takeover: err=%v runs=%d", err, f.runs)
	}
}

func TestMiddlewareKeyReuseIsPermanentAndLoud(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if err := f.h.Handle(ctx, message("m1", "k1", "one body")); err != nil {
		t.Fatal(err)
	}
	err := f.h.Handle(ctx, message("m2", "k1", "another body"))
	var pe *consumer.PermanentError
	var kr *dedupe.KeyReuseError
	if !errors.As(err, &pe) || !errors.As(err, &kr) {
		t.Fatalf("key reuse: %v, want a permanent KeyReuseError", err)
	}
	var classed interface{ FailureClass() string }
	if !errors.As(err, &classed) || classed.FailureClass() != consumer.ClassKeyReuse {
		t.Fatalf("key reuse class: %v", err)
	}
	if f.runs != 1 {
		t.Fatalf("handler ran %d times, want 1", f.runs)
	}
	if n := f.logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
		t.Fatalf("key reuse logged %d errors, want 1", n)
	}
	for _, e := range f.logs.All() {
		for _, field := range e.Context {
			if field.String == "one body" || field.String == "another body" {
				t.Fatalf("message body logged: %v", e)
			}
		}
	}
}

func TestMiddlewareLeaseCappedAtDeadline(t *testing.T) {
	t.Parallel()
	store := dedupe.NewMemory(dedupe.MemoryConfig{})
	h := wrap(t, store, dedupe.Config{Lease: time.Hour})(consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		c, err := store.Claim(ctx, msg.Key(), dedupe.Fingerprint(msg.Body), time.Second)
		if err != nil {
			return err
		}
		if c.Status != dedupe.InProgress {
			t.Errorf("status %s, want in_progress", c.Status)
		}
		if d := time.Until(c.LeaseUntil); d > 5*time.Second {
			t.Errorf("lease ends in %s, past the context deadline", d)
		}
		return nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Handle(ctx, message("m1", "k1", "body")); err != nil {
		t.Fatal(err)
	}
	// A context with no time left never claims.
	done, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if err := h.Handle(done, message("m2", "k2", "body")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired context: %v", err)
	}
	if c, _ := store.Claim(context.Background(), "k2", "x", time.Second); c.Status != dedupe.Claimed {
		t.Fatalf("expired context left a claim: %s", c.Status)
	}
}

// failingStore fails Complete with err.
type failingStore struct {
	dedupe.Store
	err error
}

func (s failingStore) Complete(context.Context, string, string) error { return s.err }

func TestMiddlewareCompleteFailureIsReturned(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	h := wrap(t, failingStore{dedupe.NewMemory(dedupe.MemoryConfig{}), boom}, dedupe.Config{})(
		consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }))
	if err := h.Handle(context.Background(), message("m1", "k1", "b")); !errors.Is(err, boom) {
		t.Fatalf("complete failure: %v", err)
	}
}

// TestMiddlewareOutcomes runs the middleware inside the consumer's
// pipeline: each store answer becomes the outcome docs/architecture.md
// promises.
func TestMiddlewareOutcomes(t *testing.T) {
	t.Parallel()
	clock := dedupetest.NewClock(time.Unix(1_800_000_000, 0))
	store := dedupe.NewMemory(dedupe.MemoryConfig{NowFunc: clock.Now})
	fail := errors.New("downstream down")
	var herr error
	p := consumertest.New(consumer.Config{
		Handler:    consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return herr }),
		Middleware: []consumer.Middleware{wrap(t, store, dedupe.Config{NowFunc: clock.Now})},
	})
	ctx := context.Background()
	process := func(key, body string) consumer.Result { return p.Process(ctx, message("id", key, body)).Result }

	herr = fail
	if res := process("a", "x"); res.Outcome != consumer.OutcomeRetry {
		t.Fatalf("transient failure: %v", res.Outcome)
	}
	herr = consumer.Permanent(fail)
	if res := process("a", "x"); res.Outcome != consumer.OutcomeDeadLetter || res.Class != consumer.ClassPermanent {
		t.Fatalf("permanent failure: %v %s", res.Outcome, res.Class)
	}
	herr = nil // the redrive of the dead letter runs it again
	if res := process("a", "x"); res.Outcome != consumer.OutcomeAck {
		t.Fatalf("redrive after a permanent failure: %v %v", res.Outcome, res.Err)
	}
	if res := process("a", "x"); res.Outcome != consumer.OutcomeDuplicate {
		t.Fatalf("redelivery: %v", res.Outcome)
	}
	if res := process("a", "y"); res.Outcome != consumer.OutcomeDeadLetter || res.Class != consumer.ClassKeyReuse {
		t.Fatalf("key reuse: %v %s", res.Outcome, res.Class)
	}
	if _, err := store.Claim(ctx, "b", dedupe.Fingerprint("x"), 40*time.Second); err != nil {
		t.Fatal(err)
	}
	if res := process("b", "x"); res.Outcome != consumer.OutcomeRetry || res.Delay != time.Second {
		t.Fatalf("in progress: %v after %s, want retry after 1s", res.Outcome, res.Delay)
	}
}

// lostObserver records LeaseLost events.
type lostObserver struct {
	consumer.NopObserver
	mu   sync.Mutex
	lost []error
}

func (o *lostObserver) LeaseLost(_ *consumer.Message, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lost = append(o.lost, err)
}

func (o *lostObserver) events() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.lost...)
}

// TestMiddlewareLeaseLostAtCompletionIsObserved: when the handler
// succeeded but its record cannot be completed (taken over, or the store
// failed), the effect may repeat: Observer.LeaseLost hears of it, once. A
// failed handler or a clean completion reports nothing.
func TestMiddlewareLeaseLostAtCompletionIsObserved(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	for _, tc := range []struct {
		name     string
		takeover bool  // another delivery takes the key over while the handler runs
		reported bool  // the consumer saw the loss and cancelled the handler
		complete error // what Complete fails with
		herr     error // what the handler returns
		want     error // the LeaseLost event's cause; nil: none
	}{
		{name: "taken over", takeover: true, want: dedupe.ErrNotOwner},
		{name: "taken over, already reported", takeover: true, reported: true},
		{name: "completion failed", complete: boom, want: boom},
		{name: "handler failed after a takeover", takeover: true, herr: errors.New("boom")},
		{name: "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := dedupetest.NewClock(time.Unix(1_800_000_000, 0))
			mem := dedupe.NewMemory(dedupe.MemoryConfig{NowFunc: clock.Now})
			var store dedupe.Store = mem
			if tc.complete != nil {
				store = failingStore{mem, tc.complete}
			}
			obs := &lostObserver{}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			h := wrap(t, store, dedupe.Config{Lease: 30 * time.Second, NowFunc: clock.Now, Observer: obs})(
				consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
					if tc.takeover {
						clock.Advance(31 * time.Second)
						if c, err := mem.Claim(ctx, msg.Key(), dedupe.Fingerprint(msg.Body), time.Minute); err != nil || c.Status != dedupe.Claimed {
							t.Fatalf("takeover: %v %v", c.Status, err)
						}
					}
					if tc.reported { // as the consumer does when a heartbeat finds the lease lost
						cancel(fmt.Errorf("%w: %w", consumer.ErrLeaseLost, dedupe.ErrNotOwner))
					}
					return tc.herr
				}))
			err := h.Handle(ctx, message("m1", "k1", "body"))
			got := obs.events()
			if tc.takeover && tc.herr == nil && !errors.Is(err, dedupe.ErrNotOwner) {
				t.Fatalf("Handle after a takeover: %v, want ErrNotOwner from the completion", err)
			}
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("LeaseLost events %v, want none", got)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Handle: %v, want an error wrapping %v", err, tc.want)
			}
			if len(got) != 1 || !errors.Is(got[0], consumer.ErrLeaseLost) || !errors.Is(got[0], tc.want) {
				t.Fatalf("LeaseLost events %v, want one wrapping ErrLeaseLost and %v", got, tc.want)
			}
		})
	}
}

// TestNewValidates: a missing store or a negative duration fails at
// start-up with the field to set, not at the first message.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	store := dedupe.NewMemory(dedupe.MemoryConfig{})
	for _, tc := range []struct {
		cfg  dedupe.Config
		want string
	}{
		{dedupe.Config{}, "Config.Store"},
		{dedupe.Config{Store: store, Lease: -time.Second}, "Config.Lease"},
		{dedupe.Config{Store: store, SettleTimeout: -time.Second}, "SettleTimeout"},
	} {
		if _, err := dedupe.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
	if _, err := dedupe.New(dedupe.Config{Store: store}); err != nil {
		t.Errorf("New with a store: %v", err)
	}
}
