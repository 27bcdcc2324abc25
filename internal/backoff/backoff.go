// Package backoff computes exponential backoff delays with full jitter.
//
//	d := backoff.FullJitter(time.Second, time.Minute, attempt, rand.Int64N)
package backoff

import (
	"math/rand/v2"
	"time"
)

// Ceiling is the largest delay for attempt (1-based): base·2^(attempt-1),
// capped at limit. Attempts below 1 count as 1.
func Ceiling(base, limit time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0
	}
	if limit < base {
		limit = base
	}
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt; i++ {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// FullJitter returns a delay drawn uniformly from [0, Ceiling] using rnd,
// which returns a value in [0, n) like math/rand/v2.Int64N (nil means
// that function).
func FullJitter(base, limit time.Duration, attempt int, rnd func(n int64) int64) time.Duration {
	c := Ceiling(base, limit, attempt)
	if c <= 0 {
		return 0
	}
	if rnd == nil {
		rnd = rand.Int64N
	}
	return time.Duration(rnd(int64(c) + 1))
}
