package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
)

type classedError struct{ class string }

func (e classedError) Error() string        { return "classed " + e.class }
func (e classedError) FailureClass() string { return e.class }

func TestClassification(t *testing.T) {
	t.Parallel()
	errPlain := errors.New("plain")
	for _, tc := range []struct {
		name        string
		err         error
		receives    int
		maxAttempts int
		want        consumer.Outcome
		delay       time.Duration
		class       string
	}{
		{"nil acks", nil, 1, 0, consumer.OutcomeAck, 0, ""},
		{"duplicate", fmt.Errorf("x: %w", consumer.ErrDuplicate), 1, 0, consumer.OutcomeDuplicate, 0, ""},
		{"permanent", consumer.Permanent(errPlain), 1, 0, consumer.OutcomeDeadLetter, 0, consumer.ClassPermanent},
		{"wrapped permanent", fmt.Errorf("ctx: %w", consumer.Permanent(errPlain)), 1, 3, consumer.OutcomeDeadLetter, 0, consumer.ClassPermanent},
		{"retry after", consumer.RetryAfter(errPlain, 42*time.Second), 1, 0, consumer.OutcomeRetry, 42 * time.Second, ""},
		{"failure class", fmt.Errorf("dedupe: %w", classedError{consumer.ClassKeyReuse}), 1, 0, consumer.OutcomeDeadLetter, 0, consumer.ClassKeyReuse},
		{"transient, attempt 1", errPlain, 1, 0, consumer.OutcomeRetry, time.Second, ""},
		{"transient, attempt 4", errPlain, 4, 0, consumer.OutcomeRetry, 8 * time.Second, ""},
		{"transient capped", errPlain, 30, 0, consumer.OutcomeRetry, time.Minute, ""},
		{"below max attempts", errPlain, 2, 3, consumer.OutcomeRetry, 2 * time.Second, ""},
		{"at max attempts", errPlain, 3, 3, consumer.OutcomeDeadLetter, 0, consumer.ClassMaxAttempts},
		{"past max attempts", errPlain, 9, 3, consumer.OutcomeDeadLetter, 0, consumer.ClassMaxAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := consumertest.New(consumer.Config{
				Handler:     consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return tc.err }),
				Backoff:     consumer.Backoff{Base: time.Second, Cap: time.Minute, RandFunc: ceiling},
				MaxAttempts: tc.maxAttempts,
			})
			res := p.Process(context.Background(), consumertest.NewMessage("b", consumertest.WithReceiveCount(tc.receives)))
			if res.Outcome != tc.want || res.Delay != tc.delay || res.Class != tc.class || !errors.Is(res.Err, tc.err) {
				t.Errorf("got %s delay %s class %q err %v; want %s delay %s class %q", res.Outcome, res.Delay, res.Class, res.Err, tc.want, tc.delay, tc.class)
			}
			if tc.class == consumer.ClassMaxAttempts && !strings.HasPrefix(res.Reason, "max attempts") {
				t.Errorf("reason %q, want it to start with \"max attempts\"", res.Reason)
			}
		})
	}
}

func TestPipelinePanicAndShutdown(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	p := consumertest.New(consumer.Config{
		Logger:  zap.New(core),
		Backoff: consumer.Backoff{RandFunc: ceiling},
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			if m.Body == "panic" {
				panic("boom")
			}
			<-ctx.Done()
			return ctx.Err()
		}),
	})
	res := p.Process(context.Background(), consumertest.NewMessage("panic"))
	var pe *consumer.PanicError
	if res.Outcome != consumer.OutcomeRetry || res.Class != consumer.ClassPanic || !errors.As(res.Err, &pe) || pe.Value != "boom" {
		t.Errorf("panic: got %+v", res)
	}
	if l := logs.FilterMessage("handler panicked").All(); len(l) != 1 || !strings.Contains(l[0].ContextMap()["stack"].(string), "pipeline_test.go") {
		t.Errorf("panic log lines %v, want one with the stack", l)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(consumer.ErrShutdown)
	if res := p.Process(ctx, consumertest.NewMessage("wait")); res.Outcome != consumer.OutcomeRelease {
		t.Errorf("cancelled by shutdown: outcome %s, want release", res.Outcome)
	}
	ctx, cancel = context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("%w: gone", consumer.ErrLeaseLost))
	if res := p.Process(ctx, consumertest.NewMessage("wait")); res.Outcome != consumer.OutcomeRetry {
		t.Errorf("cancelled by a lost lease: outcome %s, want retry", res.Outcome)
	}
}

func TestClassifierChainFirstDecisiveWins(t *testing.T) {
	t.Parallel()
	errValidation := errors.New("validation")
	calls := 0
	noOpinion := consumer.ClassifierFunc(func(context.Context, *consumer.Message, error) (consumer.Verdict, bool) {
		calls++
		return consumer.Verdict{}, false
	})
	validation := consumer.ClassifierFunc(func(_ context.Context, _ *consumer.Message, err error) (consumer.Verdict, bool) {
		if errors.Is(err, errValidation) {
			return consumer.Verdict{Outcome: consumer.OutcomeDeadLetter, Class: "validation"}, true
		}
		return consumer.Verdict{}, false
	})
	h := consumertest.New(consumer.Config{
		Classifier: consumer.ClassifierChain(nil, noOpinion, validation),
		Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
			if m.Body == "bad" {
				return errValidation
			}
			return errors.New("other")
		}),
	})
	if r := h.Process(context.Background(), consumertest.NewMessage("bad")); r.Outcome != consumer.OutcomeDeadLetter || r.Failure == nil || r.Failure.Class != "validation" {
		t.Errorf("validation error: %+v", r)
	}
	if r := h.Process(context.Background(), consumertest.NewMessage("x")); r.Outcome != consumer.OutcomeRetry {
		t.Errorf("other error: %s, want the default's retry", r.Outcome)
	}
	if calls != 2 {
		t.Errorf("first classifier asked %d times, want 2", calls)
	}
}
