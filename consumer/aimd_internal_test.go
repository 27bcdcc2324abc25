package consumer

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// TestAIMD: a slow-down halves the rate, once per second however many
// come; each second without one adds Increase, up to the configured rate;
// a cut starts from the rate achieved over the last second when lower,
// and never goes below Min.
func TestAIMD(t *testing.T) {
	t0 := time.Unix(1_900_000_000, 0)
	a := newAIMD(100, Adaptive{Decrease: 0.5, Increase: 5, Min: 6}, t0)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	near("at the start", a.rate(t0), 100)
	from, to, cut := a.slowDown(t0)
	if !cut {
		t.Fatal("the first slow-down did not cut")
	}
	near("from", from, 100)
	near("after a cut", to, 50)
	if _, _, cut := a.slowDown(t0.Add(500 * time.Millisecond)); cut {
		t.Fatal("a second slow-down within a second cut again")
	}
	near("half a second on", a.rate(t0.Add(500*time.Millisecond)), 52.5)
	near("two seconds on", a.rate(t0.Add(2*time.Second)), 60)
	near("a minute on: back to the rate, not past it", a.rate(t0.Add(time.Minute)), 100)

	// 20 starts in a second, under a rate of 100: the cut is from 20.
	t1 := t0.Add(2 * time.Minute)
	a.started(t1)
	for i := range 19 {
		a.started(t1.Add(time.Duration(i+1) * 45 * time.Millisecond))
	}
	a.started(t1.Add(time.Second)) // the window ends: 20 in it
	_, to, _ = a.slowDown(t1.Add(time.Second))
	near("cut from the rate achieved", to, 10)

	// A cut every second (each after a second's Increase): toward 5,
	// never below Min.
	for i := range 10 {
		_, to, _ = a.slowDown(t1.Add(time.Duration(2+i) * time.Second))
	}
	near("after ten cuts", to, 6)
}

// TestRateLimitedClassification: RateLimited, and a Classifier's
// ClassRateLimited, are retries of class unavailable (never dead letters)
// marked for Adaptive; a plain Unavailable is not marked.
func TestRateLimitedClassification(t *testing.T) {
	p := newProcessor(Config{Classifier: ClassifierFunc(func(_ context.Context, _ *Message, err error) (Verdict, bool) {
		if err.Error() == "partner: 429" {
			return Verdict{Outcome: OutcomeRetry, Delay: 3 * time.Second, Class: ClassRateLimited}, true
		}
		return Verdict{}, false
	})})
	msg := &Message{ReceiveCount: 9}
	for _, tc := range []struct {
		err    error
		marked bool
		delay  time.Duration
	}{
		{RateLimited(errors.New("bank: 429"), 2*time.Second), true, 2 * time.Second},
		{errors.New("partner: 429"), true, 3 * time.Second},
		{Unavailable(errors.New("bank: 503"), 2*time.Second), false, 2 * time.Second},
	} {
		res := p.classify(context.Background(), msg, tc.err)
		if res.Outcome != OutcomeRetry || res.Class != ClassUnavailable || res.rateLimited != tc.marked || res.Delay != tc.delay {
			t.Errorf("%v: %s class %q delay %v marked %v; want a retry of class unavailable after %v, marked %v",
				tc.err, res.Outcome, res.Class, res.Delay, res.rateLimited, tc.delay, tc.marked)
		}
	}
	if got := RateLimited(errors.New("x"), time.Second).Error(); got != "rate limited, retry after 1s: x" {
		t.Errorf("Error() = %q", got)
	}
}
