package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// TestSettledLogLines: one debug line per settled message with the fields
// the issue names, whatever the outcome.
func TestSettledLogLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		bodies := map[string]string{}
		for _, b := range []string{"ok", "dup", "retry", "dead"} {
			bodies[f.Put(q, b, "")] = b
		}
		core, logs := observer.New(zapcore.DebugLevel)
		stop := startOnFake(t, f, q, consumer.Config{
			Logger:  zap.New(core),
			KeyFunc: func(m *consumer.Message) string { return "key-" + m.Body },
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				switch m.Body {
				case "dup":
					return fmt.Errorf("claim: %w", consumer.ErrDuplicate)
				case "retry":
					return consumer.RetryAfter(errors.New("later"), time.Hour)
				case "dead":
					return consumer.Permanent(errors.New("no"))
				}
				return nil
			}),
		})
		for len(logs.FilterMessage(consumer.SettledMessage).All()) < 4 {
			time.Sleep(10 * time.Millisecond)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"ok": "ack", "dup": "duplicate", "retry": "retry", "dead": "dead_letter"}
		lines := logs.FilterMessage(consumer.SettledMessage).All()
		if len(lines) != 4 {
			t.Fatalf("%d settled lines, want 4", len(lines))
		}
		for _, l := range lines {
			if l.Level != zapcore.DebugLevel {
				t.Errorf("settled line at %s", l.Level)
			}
			fields := l.ContextMap()
			body := bodies[fmt.Sprint(fields["message_id"])]
			if fields["key"] != "key-"+body || fields["outcome"] != want[body] {
				t.Errorf("line %v: want key key-%s and outcome %s", fields, body, want[body])
			}
			if rc, ok := fields["receive_count"].(int64); !ok || rc != 1 {
				t.Errorf("receive_count %#v, want int64 1", fields["receive_count"])
			}
			if _, ok := fields["duration"].(time.Duration); !ok {
				t.Errorf("duration %#v, want a time.Duration", fields["duration"])
			}
		}
		for _, l := range logs.All() {
			if l.Level >= zapcore.InfoLevel {
				for _, v := range l.ContextMap() {
					if s, ok := v.(string); ok && (s == "ok" || s == "dead") {
						t.Errorf("a message body appears in an info-level line: %v", l.ContextMap())
					}
				}
			}
		}
		if n := len(f.Sent(dlq)); n != 1 {
			t.Errorf("%d dead letters, want 1", n)
		}
	})
}

// TestUnsampledLoggerKeepsSettledLines: 1,000 settled lines through the
// logger Config.Logger asks for (zap.NewProductionConfig without
// sampling) all reach the output (zap.NewProduction would keep ~200).
func TestUnsampledLoggerKeepsSettledLines(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log.json")
	cfg := zap.NewProductionConfig()
	cfg.Sampling = nil
	cfg.Level = zap.NewAtomicLevelAt(zapcore.DebugLevel)
	cfg.OutputPaths = []string{path}
	logger, err := cfg.Build()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		m := consumertest.NewMessage("secret body", consumertest.WithID(fmt.Sprint(i)))
		consumer.LogSettled(logger, m, consumer.Result{Outcome: consumer.OutcomeAck, Duration: time.Millisecond})
	}
	_ = logger.Sync()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d lines written, want 1000", len(lines))
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[999]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["msg"] != "settled" || rec["message_id"] != "999" || rec["outcome"] != "ack" || rec["receive_count"] != float64(1) {
		t.Errorf("line %v", rec)
	}
	if rec["msg"] != consumer.SettledMessage {
		t.Errorf("the settled line's message is %v, consumer.SettledMessage %q", rec["msg"], consumer.SettledMessage)
	}
	if strings.Contains(string(data), "secret body") {
		t.Error("the body was logged")
	}
}

// TestLeaseLostCancelsHandler: a refused visibility extension cancels the
// handler's context with a cause wrapping ErrLeaseLost.
func TestLeaseLostCancelsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "3"}, nil)
		f.Put(q, "slow", "")
		obs := &recordingObserver{}
		var cause atomic.Value
		stop := startOnFake(t, f, q, consumer.Config{
			// The running handler holds the only slot: the consumer does
			// not receive while it runs, so the thief below gets the message.
			Concurrency: 1, Prefetch: consumer.NoPrefetch,
			Observer: obs,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				steal(t, f, q, aws.ToString(m.Raw.ReceiptHandle))
				<-ctx.Done()
				cause.Store(context.Cause(ctx))
				return ctx.Err()
			}),
		})
		for cause.Load() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		err, _ := cause.Load().(error)
		if !errors.Is(err, consumer.ErrLeaseLost) || !strings.Contains(err.Error(), "ReceiptHandleIsInvalid") {
			t.Errorf("cause %v, want ErrLeaseLost with the refusal", err)
		}
		if len(obs.lost) != 1 || obs.hbFailed != 1 {
			t.Errorf("observed %d lost leases, %d heartbeat failures; want 1 and 1", len(obs.lost), obs.hbFailed)
		}
	})
}

// TestOnHeartbeatErrorCancelsHandler: the functions a middleware registers
// with Message.OnHeartbeat run on each tick while the handler runs; an
// error cancels the handler with ErrLeaseLost.
func TestOnHeartbeatErrorCancelsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		f.Put(q, "x", "")
		var beats atomic.Int64
		errLease := errors.New("dedupe lease taken over")
		var cause atomic.Value
		var ran atomic.Int64
		stop := startOnFake(t, f, q, consumer.Config{
			Middleware: []consumer.Middleware{func(next consumer.Handler) consumer.Handler {
				return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
					m.OnHeartbeat(func(ctx context.Context) error {
						if beats.Add(1) == 3 {
							return errLease
						}
						return nil
					})
					return next.Handle(ctx, m)
				})
			}},
			Backoff: consumer.Backoff{Base: time.Hour, RandFunc: ceiling},
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				ran.Add(1)
				<-ctx.Done()
				cause.Store(context.Cause(ctx))
				return ctx.Err()
			}),
		})
		for cause.Load() == nil {
			time.Sleep(time.Second)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		err, _ := cause.Load().(error)
		if !errors.Is(err, consumer.ErrLeaseLost) || !errors.Is(err, errLease) {
			t.Errorf("cause %v, want ErrLeaseLost wrapping the heartbeat error", err)
		}
		if beats.Load() != 3 || ran.Load() != 1 {
			t.Errorf("%d beats, %d runs; want 3 and 1", beats.Load(), ran.Load())
		}
	})
}

// TestOnHeartbeatOnlyWhileRunning: a message's OnHeartbeat functions are
// ticked only while its handler runs: not after it returned, and not when
// registered after it returned.
func TestOnHeartbeatOnlyWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		f.Put(q, "quick", "")
		f.Put(q, "late", "")
		f.Put(q, "slow", "")
		var quick, late, slow atomic.Int64
		lateDone := make(chan struct{})
		release := make(chan struct{})
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 3,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				switch m.Body {
				case "slow": // keeps the run going while the heartbeat ticks
					m.OnHeartbeat(func(context.Context) error { slow.Add(1); return nil })
					<-release
					return nil
				case "quick":
					m.OnHeartbeat(func(context.Context) error { quick.Add(1); return nil })
					return nil
				}
				go func() {
					time.Sleep(time.Millisecond) // after the handler returned
					m.OnHeartbeat(func(context.Context) error { late.Add(1); return nil })
					close(lateDone)
				}()
				return nil
			}),
		})
		<-lateDone
		for slow.Load() < 3 {
			time.Sleep(time.Second)
		}
		close(release)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if quick.Load() != 0 || late.Load() != 0 {
			t.Errorf("functions of a returned handler ran %d times (registered while it ran) and %d times (after); want 0", quick.Load(), late.Load())
		}
	})
}

// TestSettlerRetriesFailedEntries: entries a batch call reports as failed
// are retried one by one.
func TestSettlerRetriesFailedEntries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		for i := range 5 {
			f.Put(q, fmt.Sprint(i), "")
		}
		var mu sync.Mutex
		fail := map[string]bool{}
		// DeleteMessageBatch reports the chosen handles as failed (without
		// deleting them).
		f.Inject(func(op string, in any) sqsfake.Fault {
			if op != "DeleteMessageBatch" {
				return sqsfake.Fault{}
			}
			mu.Lock()
			defer mu.Unlock()
			failed := map[string]string{}
			for _, e := range in.(*sqs.DeleteMessageBatchInput).Entries {
				if fail[aws.ToString(e.ReceiptHandle)] {
					failed[aws.ToString(e.Id)] = "InternalError"
				}
			}
			return sqsfake.Fault{FailEntries: failed}
		})
		var n atomic.Int64
		c, err := consumer.New(consumer.Config{
			Client: f, QueueURL: q,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				if m.Body == "1" || m.Body == "3" {
					mu.Lock()
					fail[aws.ToString(m.Raw.ReceiptHandle)] = true
					mu.Unlock()
				}
				n.Add(1)
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		for len(f.Messages(q)) > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n.Load() != 5 {
			t.Errorf("%d handled, want 5", n.Load())
		}
		if got := f.Calls("DeleteMessage"); got != 2 {
			t.Errorf("%d single DeleteMessage retries, want 2", got)
		}
		checkProblems(t, f)
	})
}

// steal makes handle stale, as when the message's visibility ran out and
// another consumer received it: the message is made visible and received
// again, straight from the fake.
func steal(t *testing.T, f *sqsfake.Fake, q, handle string) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q), ReceiptHandle: aws.String(handle)}); err != nil {
		t.Errorf("steal: %v", err)
		return
	}
	out, err := f.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 1, VisibilityTimeout: 3600})
	if err != nil || len(out.Messages) != 1 {
		t.Errorf("steal: received %v, %v", out, err)
	}
}

// TestLostBeforeStartNotRun: a message waiting for a worker whose
// visibility cannot be extended is not run (another consumer may have it).
func TestLostBeforeStartNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "3"}, nil)
		f.Put(q, "first", "")
		f.Put(q, "second", "")
		release := make(chan struct{})
		var mu sync.Mutex
		var ran []string
		obs := &recordingObserver{}
		stop := startOnFake(t, f, q, consumer.Config{
			Concurrency: 1, Prefetch: 1, Receivers: 1, Observer: obs,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				mu.Lock()
				ran = append(ran, m.Body)
				first := len(ran) == 1
				mu.Unlock()
				if first {
					// Another consumer takes the waiting message (both
					// slots are held: this consumer does not receive
					// meanwhile), so its extension fails; then keep the
					// only worker busy past its visibility.
					for _, fm := range f.Messages(q) {
						if fm.Body != m.Body {
							steal(t, f, q, fm.ReceiptHandle)
						}
					}
					<-release
				}
				return nil
			}),
		})
		for obs.lostCount() == 0 {
			time.Sleep(100 * time.Millisecond)
		}
		close(release)
		for obs.count(consumer.OutcomeAck)+obs.count(consumer.OutcomeRelease) < 2 {
			time.Sleep(100 * time.Millisecond)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(ran) != 1 {
			t.Errorf("handlers ran for %v: the message whose lease was lost before it started was run", ran)
		}
		if obs.count(consumer.OutcomeRelease) != 1 {
			t.Errorf("%d released, want 1", obs.count(consumer.OutcomeRelease))
		}
	})
}
