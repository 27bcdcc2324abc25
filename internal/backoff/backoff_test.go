package backoff

import (
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{6, 32 * time.Second}, {7, time.Minute}, {1000, time.Minute},
	} {
		if got := Ceiling(time.Second, time.Minute, tc.attempt); got != tc.want {
			t.Errorf("Ceiling(1s, 1m, %d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
	if got := Ceiling(0, time.Minute, 3); got != 0 {
		t.Errorf("zero base: got %s", got)
	}
}

func TestFullJitter(t *testing.T) {
	t.Parallel()
	top := func(n int64) int64 { return n - 1 }
	if got := FullJitter(time.Second, time.Minute, 3, top); got != 4*time.Second {
		t.Errorf("top of range: got %s", got)
	}
	if got := FullJitter(time.Second, time.Minute, 3, func(int64) int64 { return 0 }); got != 0 {
		t.Errorf("bottom of range: got %s", got)
	}
	for range 1000 {
		if d := FullJitter(time.Second, time.Minute, 4, nil); d < 0 || d > 8*time.Second {
			t.Fatalf("out of range: %s", d)
		}
	}
}
