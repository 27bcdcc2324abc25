package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/deadletter"
	"github.com/sqsonce/sqsonce/internal/sqsfake"
)

// reasonBodies are the messages of the reasons golden test; the handler
// below fails each its own way. The Lambda adapter's test sends the same
// ones and compares with the same golden file.
var reasonBodies = []string{"permanent", "permanent-in-context", "retry", "max-attempts"}

func failReasonably(_ context.Context, m *consumer.Message) error {
	switch m.Body {
	case "permanent":
		return consumer.Permanent(fmt.Errorf("charge o7: %w", errors.New("422 Unprocessable Entity")))
	case "permanent-in-context":
		return fmt.Errorf("order o8: %w", consumer.Permanent(errors.New("card declined")))
	case "retry":
		return consumer.RetryAfter(errors.New("rate limited"), time.Minute)
	}
	return errors.New("still failing")
}

// reasonsReport renders, per message body, the dead letter's recorded
// failure and the settled log line, sorted.
func reasonsReport(t *testing.T, f *sqsfake.Fake, dlq string, logs *observer.ObservedLogs) string {
	t.Helper()
	var lines []string
	for _, s := range f.Sent(dlq) {
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
	return strings.Join(lines, "\n") + "\n"
}

// TestReasonsGolden: the recorded reason is the handler's error text, not
// "permanent: ..." under class permanent (issue 16), in the dead letter's
// sqsonce-failure and in the settled log line.
func TestReasonsGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/reasons.golden")
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		f, q, dlq := onFake(false, map[string]string{"VisibilityTimeout": "30"}, nil)
		for _, b := range reasonBodies {
			f.Put(q, b, "")
		}
		core, logs := observer.New(zapcore.DebugLevel)
		stop := startOnFake(t, f, q, consumer.Config{
			Logger:      zap.New(core),
			MaxAttempts: 1,
			KeyFunc:     func(m *consumer.Message) string { return m.Body },
			Handler:     consumer.HandlerFunc(failReasonably),
		})
		for logs.FilterMessage(consumer.SettledMessage).Len() < len(reasonBodies) {
			time.Sleep(10 * time.Millisecond)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got := reasonsReport(t, f, dlq, logs); got != string(want) {
			t.Errorf("reasons:\n%s\nwant (testdata/reasons.golden):\n%s", got, want)
		}
	})
}
