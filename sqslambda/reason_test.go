package sqslambda_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/sqslambda"
)

// TestReasonsGolden: the Lambda adapter records the same reasons as the
// consumer (the golden file is the consumer's): the handler's error text,
// not "permanent: ..." under class permanent (issue 16), in the dead
// letter's sqsonce-failure and in the settled log line.
func TestReasonsGolden(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("../consumer/testdata/reasons.golden")
	if err != nil {
		t.Fatal(err)
	}
	h := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		switch m.Body {
		case "permanent":
			return consumer.Permanent(fmt.Errorf("charge o7: %w", errors.New("422 Unprocessable Entity")))
		case "permanent-in-context":
			return fmt.Errorf("order o8: %w", consumer.Permanent(errors.New("card declined")))
		case "retry":
			return consumer.RetryAfter(errors.New("rate limited"), time.Minute)
		}
		return errors.New("still failing")
	})
	core, logs := observer.New(zapcore.DebugLevel)
	fake := newFake()
	a := newHandler(t, fake, h, func(c *sqslambda.Config) {
		c.Logger = zap.New(core)
		c.MaxAttempts = 1
		c.KeyFunc = func(m *consumer.Message) string { return m.Body }
	})
	ev := fake.event(
		rec(stdARN, "m1", "permanent", ""), rec(stdARN, "m2", "permanent-in-context", ""),
		rec(stdARN, "m3", "retry", ""), rec(stdARN, "m4", "max-attempts", ""),
	)
	if _, err := a.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}

	var lines []string
	for _, s := range fake.Sent(fake.QueueURL(dlqName)) {
		fl, ok := deadletter.ParseFailure(s.Attributes)
		if !ok {
			t.Fatalf("dead letter %q without a failure attribute", s.Body)
		}
		lines = append(lines, fmt.Sprintf("%s dead letter: class=%s attempts=%d error=%q", s.Body, fl.Class, fl.Attempts, fl.Error))
	}
	for _, e := range logs.FilterMessage(consumer.SettledMessage).All() {
		fields := e.ContextMap()
		class, _ := fields["class"].(string)
		lines = append(lines, fmt.Sprintf("%s settled: outcome=%s class=%s error=%q", fields["key"], fields["outcome"], class, fields["error"]))
	}
	slices.Sort(lines)
	if got := strings.Join(lines, "\n") + "\n"; got != string(want) {
		t.Errorf("reasons:\n%s\nwant (consumer/testdata/reasons.golden):\n%s", got, want)
	}
}
