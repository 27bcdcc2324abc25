package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
)

// panickyObserver panics in every method, as a buggy metrics adapter
// would.
type panickyObserver struct{ calls atomic.Int64 }

func (o *panickyObserver) boom() {
	o.calls.Add(1)
	panic("assignment to entry in nil map") // a metrics adapter's bug
}

func (o *panickyObserver) Received(*consumer.Message)                          { o.boom() }
func (o *panickyObserver) HandlerDone(*consumer.Message, time.Duration, error) { o.boom() }
func (o *panickyObserver) Settled(*consumer.Message, consumer.Result)          { o.boom() }
func (o *panickyObserver) HeartbeatFailed(int, error)                          { o.boom() }
func (o *panickyObserver) LeaseLost(*consumer.Message, error)                  { o.boom() }
func (o *panickyObserver) DeadLettered(*consumer.Message, error)               { o.boom() }
func (o *panickyObserver) DeadLetterRefused(*consumer.Message, error)          { o.boom() }
func (o *panickyObserver) SettleFailed(*consumer.Message, string, error)       { o.boom() }
func (o *panickyObserver) ReceiveFailed(error)                                 { o.boom() }

// panickyClassifier panics for every error.
var panickyClassifier = consumer.ClassifierFunc(func(context.Context, *consumer.Message, error) (consumer.Verdict, bool) {
	panic("assignment to entry in nil map") // a classifier's bug
})

// TestUserCallbackPanicsInProcess (issue 42, defect 13): a panic in a
// Classifier, an Observer method or a Middleware constructor, called by
// the per-message path, is recovered and logged with its stack; a
// classifier panic is a transient failure (a retry with backoff, class
// "panic").
func TestUserCallbackPanicsInProcess(t *testing.T) {
	failing := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return errors.New("declined") })
	acking := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	for _, tc := range []struct {
		name    string
		cfg     consumer.Config
		outcome consumer.Outcome
		class   string
		logged  string // in the message of the error line
	}{
		{"classifier", consumer.Config{Handler: failing, Classifier: panickyClassifier}, consumer.OutcomeRetry, consumer.ClassPanic, "Classifier"},
		{"observer", consumer.Config{Handler: acking, Observer: &panickyObserver{}}, consumer.OutcomeAck, "", "HandlerDone"},
		{"middleware constructor", consumer.Config{Handler: acking, Middleware: []consumer.Middleware{
			func(consumer.Handler) consumer.Handler { panic("no store") },
		}}, consumer.OutcomeRetry, consumer.ClassPanic, "panicked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.ErrorLevel)
			cfg := tc.cfg
			cfg.Logger = zap.New(core)
			cfg.Backoff = consumer.Backoff{Base: time.Minute, RandFunc: ceiling}
			process := consumer.NewProcess(cfg)
			var res consumer.Result
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("panic escaped processor.process: %v", v)
					}
				}()
				res = process(context.Background(), consumertest.NewMessage("x"))
			}()
			if res.Outcome != tc.outcome || res.Class != tc.class {
				t.Errorf("outcome %s, class %q; want %s, %q", res.Outcome, res.Class, tc.outcome, tc.class)
			}
			if tc.outcome == consumer.OutcomeRetry && res.Delay != time.Minute {
				t.Errorf("retry after %s, want the backoff's 1m", res.Delay)
			}
			lines := logs.FilterMessageSnippet(tc.logged).All()
			if len(lines) != 1 || !strings.Contains(fmt.Sprint(lines[0].ContextMap()["stack"]), "panic_test.go") {
				t.Errorf("error lines %v, want one about %s with the stack", logs.All(), tc.logged)
			}
		})
	}
}

// TestUserCallbackPanicsInRun (issue 42, defect 13): an Observer that
// panics in every method, a Classifier that panics, and an OnHeartbeat
// function that panics do not crash the worker: every message is settled
// as if the callbacks had not been there (the classifier's panic counting
// as a transient failure), and the panicking OnHeartbeat function cancels
// its handler as a failed one does.
func TestUserCallbackPanicsInRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, q, _ := onFake(false, map[string]string{"VisibilityTimeout": "3"}, nil)
		f.Put(q, "ok", "")
		f.Put(q, "fail", "")
		f.Put(q, "beat", "")
		obs := &panickyObserver{}
		var rc runCounter
		var cause atomic.Value
		stop := startOnFake(t, f, q, consumer.Config{
			Observer:   obs,
			Classifier: panickyClassifier,
			Backoff:    consumer.Backoff{Base: time.Hour, RandFunc: ceiling},
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				rc.add(m)
				switch m.Body {
				case "fail":
					return errors.New("declined")
				case "beat":
					m.OnHeartbeat(func(context.Context) error {
						panic("assignment to entry in nil map") // a lease keeper's bug
					})
					<-ctx.Done()
					cause.Store(context.Cause(ctx))
					return ctx.Err()
				}
				return nil
			}),
		})
		if !waitUntil(time.Minute, func() bool { return cause.Load() != nil && len(f.Messages(q)) == 2 }) {
			t.Fatalf("after a minute: %d messages left, want 2 (fail and beat)", len(f.Messages(q)))
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		for _, b := range []string{"ok", "fail", "beat"} {
			if runs, _, _ := rc.get(b); runs != 1 {
				t.Errorf("%s ran %d times, want 1", b, runs)
			}
		}
		if err, _ := cause.Load().(error); !errors.Is(err, consumer.ErrLeaseLost) {
			t.Errorf("beat's handler cancelled with %v, want ErrLeaseLost", err)
		}
		if obs.calls.Load() == 0 {
			t.Error("the observer was never called")
		}
		checkProblems(t, f)
	})
}
