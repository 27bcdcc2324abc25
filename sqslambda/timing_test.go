package sqslambda_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// leaseRecorder is a dedupe.Store that records the lease of every claim.
type leaseRecorder struct {
	dedupe.Store
	mu     sync.Mutex
	leases []time.Time // now + lease, per claim
}

func (s *leaseRecorder) Claim(ctx context.Context, key, fp string, lease time.Duration) (dedupe.Claim, error) {
	s.mu.Lock()
	s.leases = append(s.leases, time.Now().Add(lease))
	s.mu.Unlock()
	return s.Store.Claim(ctx, key, fp, lease)
}

// sleeper runs for d, or until its context ends.
func sleeper(d time.Duration, ran *[]string, mu *sync.Mutex) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
		mu.Lock()
		*ran = append(*ran, msg.ID)
		mu.Unlock()
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
}

// The dedupe lease never outlives the invocation: every claim ends by the
// deadline less the margin, a handler still running then is cut short (and
// retried), and a record that could not start is handed back unrun.
func TestDeadlineCapsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFake()
		store := &leaseRecorder{Store: dedupe.NewMemory(dedupe.MemoryConfig{})}
		var mu sync.Mutex
		var ran []string
		dd, err := dedupe.New(dedupe.Config{Store: store, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		a := newHandler(t, fake, sleeper(5*time.Second, &ran, &mu), func(c *sqslambda.Config) {
			c.Middleware = []consumer.Middleware{dd.Wrap}
		})
		deadline := time.Now().Add(10 * time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		resp, _ := a.Handle(ctx, fake.event(
			rec(stdARN, "m1", "x", ""), rec(stdARN, "m2", "y", ""), rec(stdARN, "m3", "z", ""),
		))
		if got := failures(resp); got != "m2,m3" {
			t.Errorf("batchItemFailures = %q, want m2,m3 (m2 cut short at the deadline, m3 never started)", got)
		}
		if !slices.Equal(ran, []string{"m1", "m2"}) {
			t.Errorf("ran %v, want m1, m2", ran)
		}
		limit := deadline.Add(-sqslambda.DefaultDeadlineMargin)
		if len(store.leases) != 2 {
			t.Fatalf("%d claims, want 2", len(store.leases))
		}
		for i, until := range store.leases {
			if until.After(limit) {
				t.Errorf("claim %d leased until %s, after the deadline less the margin %s", i, until, limit)
			}
		}
		if v := fake.visibilities()["rh-m3"]; !slices.Equal(v, []int32{0}) {
			t.Errorf("m3 visibility changes %v, want [0] (released at once)", v)
		}
		if !time.Now().Before(deadline) {
			t.Errorf("Handle returned at %s, not before the deadline %s", time.Now(), deadline)
		}
	})
}

// A batch that runs longer than the visibility timeout keeps its messages
// invisible with the heartbeat, including records not started yet.
func TestHeartbeatExtendsLongBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFake()
		var mu sync.Mutex
		var ran []string
		a := newHandler(t, fake, sleeper(7*time.Second, &ran, &mu), func(c *sqslambda.Config) {
			c.Visibility = 3 * time.Second
		})
		resp, _ := a.Handle(context.Background(), fake.event(
			rec(stdARN, "m1", "x", ""), rec(stdARN, "m2", "y", ""),
		))
		if got := failures(resp); got != "" {
			t.Errorf("batchItemFailures = %q, want none", got)
		}
		if n := fake.extensions("rh-m1"); n < 2 {
			t.Errorf("m1 extended %d times over its 7s run, want at least 2", n)
		}
		if n := fake.extensions("rh-m2"); n < 4 {
			t.Errorf("m2 extended %d times while waiting and running (14s), want at least 4", n)
		}
	})
}

// refusingSQS refuses every visibility extension.
type refusingSQS struct{ *fakeSQS }

func (r refusingSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true, Message: aws.String("gone")})
	}
	return out, nil
}

func TestLostVisibilityCancelsTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFake()
		var cause error
		var ran []string
		h := consumer.HandlerFunc(func(ctx context.Context, msg *consumer.Message) error {
			ran = append(ran, msg.ID)
			select {
			case <-time.After(time.Minute):
				return nil
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return cause
			}
		})
		a := newHandler(t, refusingSQS{fake}, h, func(c *sqslambda.Config) { c.Visibility = 3 * time.Second })
		resp, _ := a.Handle(context.Background(), fake.event(
			rec(stdARN, "m1", "x", ""), rec(stdARN, "m2", "y", ""),
		))
		if got := failures(resp); got != "m1,m2" {
			t.Errorf("batchItemFailures = %q, want m1,m2", got)
		}
		if !errors.Is(cause, consumer.ErrLeaseLost) {
			t.Errorf("handler context cause = %v, want ErrLeaseLost", cause)
		}
		if !slices.Equal(ran, []string{"m1"}) {
			t.Errorf("ran %v, want only m1: m2 lost its visibility before it started", ran)
		}
	})
}

func TestCheck(t *testing.T) {
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	newChecked := func(t *testing.T, fake *fakeSQS, mod func(*sqslambda.Config)) (*sqslambda.Handler, *observer.ObservedLogs) {
		core, logs := observer.New(zapcore.WarnLevel)
		cfg := sqslambda.Config{Client: fake, Handler: h, Logger: zap.New(core)}
		mod(&cfg)
		a, err := sqslambda.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return a, logs
	}
	warnings := func(logs *observer.ObservedLogs) int {
		return logs.FilterMessageSnippet("visibility timeout is too short").Len()
	}

	t.Run("configured timeout too long for the queue", func(t *testing.T) {
		fake := newFake()
		a, logs := newChecked(t, fake, func(c *sqslambda.Config) { c.QueueURL = stdURL; c.FunctionTimeout = 200 * time.Second })
		err := a.Check(context.Background())
		var te *sqslambda.TimeoutError
		if !errors.As(err, &te) || te.Visibility != 600*time.Second || te.FunctionTimeout != 200*time.Second {
			t.Fatalf("Check = %v, want a TimeoutError 600s vs 200s", err)
		}
		if warnings(logs) != 1 {
			t.Errorf("%d warnings, want 1", warnings(logs))
		}
		// The first invocation does not warn again.
		_, _ = a.Handle(context.Background(), fake.event(rec(stdARN, "m1", "x", "")))
		if warnings(logs) != 1 {
			t.Errorf("%d warnings after an invocation, want still 1", warnings(logs))
		}
	})
	t.Run("within the recommendation", func(t *testing.T) {
		a, logs := newChecked(t, newFake(), func(c *sqslambda.Config) { c.QueueURL = stdURL; c.FunctionTimeout = 100 * time.Second })
		if err := a.Check(context.Background()); err != nil {
			t.Fatalf("Check = %v, want nil", err)
		}
		if warnings(logs) != 0 {
			t.Errorf("%d warnings, want 0", warnings(logs))
		}
	})
	t.Run("timeout from the environment", func(t *testing.T) {
		t.Setenv("AWS_LAMBDA_FUNCTION_TIMEOUT", "300")
		a, _ := newChecked(t, newFake(), func(c *sqslambda.Config) { c.QueueURL = stdURL })
		var te *sqslambda.TimeoutError
		if err := a.Check(context.Background()); !errors.As(err, &te) || te.FunctionTimeout != 300*time.Second {
			t.Fatalf("Check = %v, want a TimeoutError with the 300s timeout from the environment", err)
		}
	})
	t.Run("learned from the first invocation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := newFake()
			a, logs := newChecked(t, fake, func(*sqslambda.Config) {})
			if err := a.Check(context.Background()); !errors.Is(err, sqslambda.ErrUnknownTimeouts) {
				t.Fatalf("Check = %v, want ErrUnknownTimeouts", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 900*time.Second)
			defer cancel()
			for range 2 {
				_, _ = a.Handle(ctx, fake.event(rec(stdARN, "m1", "ack", "")))
			}
			if warnings(logs) != 1 {
				t.Fatalf("%d warnings, want 1 (600s visibility, 900s timeout)", warnings(logs))
			}
			f := logs.FilterMessageSnippet("visibility timeout is too short").All()[0].ContextMap()
			if f["function_timeout"] != 900*time.Second || f["recommended_visibility_timeout"] != 5400*time.Second {
				t.Errorf("warning fields = %v", f)
			}
		})
	})
}

func TestSettledLogLines(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	fake := newFake()
	a := newHandler(t, fake, &scripted{}, func(c *sqslambda.Config) { c.Logger = zap.New(core) })
	_, _ = a.Handle(context.Background(), fake.event(
		rec(fifoARN, "a1", "ack", "A"), rec(fifoARN, "a2", "retry", "A"), rec(fifoARN, "a3", "ack", "A"), rec(fifoARN, "b1", "perm", "B"),
	))
	got := map[string]string{}
	for _, e := range logs.FilterMessage(consumer.SettledMessage).All() {
		f := e.ContextMap()
		got[f["message_id"].(string)] = f["outcome"].(string)
		if f["key"] != f["message_id"] || f["receive_count"] != int64(1) {
			t.Errorf("settled line fields = %v", f)
		}
		if _, ok := f["duration"]; !ok {
			t.Errorf("settled line without duration: %v", f)
		}
	}
	want := map[string]string{"a1": "ack", "a2": "retry", "a3": "release", "b1": "dead_letter"}
	if len(got) != len(want) {
		t.Errorf("settled lines %v, want %v", got, want)
	}
	for id, o := range want {
		if got[id] != o {
			t.Errorf("%s settled as %q, want %q", id, got[id], o)
		}
	}
}
