package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/sqsmsg"
)

// TestRateLimitedClassification: RateLimited, and a Classifier's
// ClassRateLimited, are retries of class unavailable (never dead letters)
// marked RateLimited for an adaptive rate; a plain Unavailable is not
// marked.
func TestRateLimitedClassification(t *testing.T) {
	t.Parallel()
	p := New(Config{Classifier: sqsmsg.ClassifierFunc(func(_ context.Context, _ *sqsmsg.Message, err error) (sqsmsg.Verdict, bool) {
		if err.Error() == "partner: 429" {
			return sqsmsg.Verdict{Outcome: sqsmsg.OutcomeRetry, Delay: 3 * time.Second, Class: sqsmsg.ClassRateLimited}, true
		}
		return sqsmsg.Verdict{}, false
	})})
	msg := &sqsmsg.Message{ReceiveCount: 9}
	for _, tc := range []struct {
		err    error
		marked bool
		delay  time.Duration
	}{
		{sqsmsg.RateLimited(errors.New("bank: 429"), 2*time.Second), true, 2 * time.Second},
		{errors.New("partner: 429"), true, 3 * time.Second},
		{sqsmsg.Unavailable(errors.New("bank: 503"), 2*time.Second), false, 2 * time.Second},
	} {
		res := p.classify(context.Background(), msg, tc.err)
		if res.Outcome != sqsmsg.OutcomeRetry || res.Class != sqsmsg.ClassUnavailable || res.RateLimited != tc.marked || res.Delay != tc.delay {
			t.Errorf("%v: %s class %q delay %v marked %v; want a retry of class unavailable after %v, marked %v",
				tc.err, res.Outcome, res.Class, res.Delay, res.RateLimited, tc.delay, tc.marked)
		}
	}
	if got := sqsmsg.RateLimited(errors.New("x"), time.Second).Error(); got != "rate limited, retry after 1s: x" {
		t.Errorf("Error() = %q", got)
	}
}
