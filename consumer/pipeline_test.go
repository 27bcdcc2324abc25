package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
			p := &consumer.Pipeline{
				Handler:     consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return tc.err }),
				Backoff:     consumer.Backoff{Base: time.Second, Cap: time.Minute, RandFunc: ceiling},
				MaxAttempts: tc.maxAttempts,
			}
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
	p := &consumer.Pipeline{
		Logger:  zap.New(core),
		Backoff: consumer.Backoff{RandFunc: ceiling},
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			if m.Body == "panic" {
				panic("boom")
			}
			<-ctx.Done()
			return ctx.Err()
		}),
	}
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
	h := &consumertest.Harness{
		Classifier: consumer.ClassifierChain(nil, noOpinion, validation),
		Handler: consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
			if m.Body == "bad" {
				return errValidation
			}
			return errors.New("other")
		}),
	}
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

func TestDeadLetterInput(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res := consumer.Result{Outcome: consumer.OutcomeDeadLetter, Err: errors.New("bad"), Class: consumer.ClassPermanent}

	t.Run("standard", func(t *testing.T) {
		m := consumertest.NewMessage("body", consumertest.WithID("mid"), consumertest.WithAttribute("a", "1"))
		in := consumer.DeadLetterInput(m, res, "src", "dlq", false, now)
		if aws.ToString(in.QueueUrl) != "dlq" || aws.ToString(in.MessageBody) != "body" || in.MessageGroupId != nil || in.MessageDeduplicationId != nil {
			t.Errorf("input %+v", in)
		}
		if len(in.MessageAttributes) != 3 || aws.ToString(in.MessageAttributes["a"].StringValue) != "1" || aws.ToString(in.MessageAttributes[consumer.AttrID].StringValue) != "mid" {
			t.Errorf("attributes %v", in.MessageAttributes)
		}
		var f consumer.Failure
		if err := json.Unmarshal([]byte(aws.ToString(in.MessageAttributes[consumer.AttrFailure].StringValue)), &f); err != nil {
			t.Fatal(err)
		}
		want := consumer.Failure{Error: "bad", Class: "permanent", SourceQueue: "src", Attempts: 1, OriginalMessageID: "mid", FailedAt: now}
		if f != want {
			t.Errorf("failure %+v, want %+v", f, want)
		}
	})
	t.Run("fifo keeps group, dedupes on the original id, keeps sqsonce-id", func(t *testing.T) {
		m := consumertest.NewMessage("body", consumertest.WithID("mid"), consumertest.WithGroup("g1"), consumertest.WithAttribute(consumer.AttrID, "job-1"))
		in := consumer.DeadLetterInput(m, res, "src.fifo", "dlq.fifo", true, now)
		if aws.ToString(in.MessageGroupId) != "g1" || aws.ToString(in.MessageDeduplicationId) != "mid" {
			t.Errorf("group %q dedup %q", aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId))
		}
		if aws.ToString(in.MessageAttributes[consumer.AttrID].StringValue) != "job-1" {
			t.Errorf("sqsonce-id %v", in.MessageAttributes[consumer.AttrID])
		}
	})
	t.Run("ten attributes already", func(t *testing.T) {
		var opts []consumertest.MessageOption
		for i := range 10 {
			opts = append(opts, consumertest.WithAttribute(fmt.Sprintf("attr%02d", i), "v"))
		}
		m := consumertest.NewMessage("body", opts...)
		in := consumer.DeadLetterInput(m, res, "src", "dlq", false, now)
		if len(in.MessageAttributes) != consumer.MaxMessageAttributes {
			t.Fatalf("%d attributes, want %d", len(in.MessageAttributes), consumer.MaxMessageAttributes)
		}
		for _, name := range []string{consumer.AttrID, consumer.AttrFailure, "attr00", "attr07"} {
			if _, ok := in.MessageAttributes[name]; !ok {
				t.Errorf("%s dropped", name)
			}
		}
		if got := consumer.DroppedAttributes(m); strings.Join(got, ",") != "attr09,attr08" {
			t.Errorf("DroppedAttributes = %v, want [attr09 attr08]", got)
		}
	})
	t.Run("a second dead-lettering replaces the failure", func(t *testing.T) {
		m := consumertest.NewMessage("body", consumertest.WithAttribute(consumer.AttrFailure, `{"class":"old"}`), consumertest.WithAttribute(consumer.AttrID, "k"))
		in := consumer.DeadLetterInput(m, res, "src", "dlq", false, now)
		if len(in.MessageAttributes) != 2 || !strings.Contains(aws.ToString(in.MessageAttributes[consumer.AttrFailure].StringValue), `"permanent"`) {
			t.Errorf("attributes %v", in.MessageAttributes)
		}
	})
}

func FuzzDeadLetterInput(f *testing.F) {
	f.Add("body", "err", 3, "name")
	f.Add("", "", 11, "sqsonce-x")
	f.Fuzz(func(t *testing.T, body, errText string, nAttrs int, name string) {
		var opts []consumertest.MessageOption
		for i := range nAttrs % 12 {
			opts = append(opts, consumertest.WithAttribute(fmt.Sprintf("%s%d", name, i), "v"))
		}
		m := consumertest.NewMessage(body, opts...)
		in := consumer.DeadLetterInput(m, consumer.Result{Err: errors.New(errText)}, "s", "d", false, time.Now())
		if len(in.MessageAttributes) > consumer.MaxMessageAttributes {
			t.Fatalf("%d attributes", len(in.MessageAttributes))
		}
		if _, ok := in.MessageAttributes[consumer.AttrFailure]; !ok {
			t.Fatal("no failure attribute")
		}
		if aws.ToString(in.MessageAttributes[consumer.AttrID].StringValue) == "" {
			t.Fatal("no id")
		}
		if aws.ToString(in.MessageBody) != body {
			t.Fatal("body changed")
		}
	})
}
