package consumer

import (
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
