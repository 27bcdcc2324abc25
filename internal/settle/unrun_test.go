package settle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/settle"
)

// TestUnrun: a count set is read back until forgotten; a nil Unrun counts
// nothing; entries outlive one new generation and are dropped by the
// next, whether it starts for age or for size, so the count errs towards
// 0 (more attempts), never more.
func TestUnrun(t *testing.T) {
	t.Parallel()
	var nilU *settle.Unrun
	nilU.Set("a", 1, time.Now())
	nilU.Forget("a")
	if n := nilU.Count("a"); n != 0 {
		t.Fatalf("nil Unrun counts %d", n)
	}

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var u settle.Unrun
	if n := u.Count("a"); n != 0 {
		t.Fatalf("empty Unrun counts %d", n)
	}
	u.Set("a", 1, t0)
	u.Set("a", 2, t0)
	u.Set("b", 0, t0) // nothing to record
	if a, b := u.Count("a"), u.Count("b"); a != 2 || b != 0 {
		t.Fatalf("counts a=%d b=%d, want 2 and 0", a, b)
	}
	u.Forget("a")
	if n := u.Count("a"); n != 0 {
		t.Fatalf("forgotten entry counts %d", n)
	}

	// By age: a generation takes entries for 12 hours.
	u.Set("old", 3, t0)
	u.Set("new", 1, t0.Add(12*time.Hour)) // starts a generation; "old" is kept in the one before
	if n := u.Count("old"); n != 3 {
		t.Fatalf("entry of the previous generation counts %d, want 3", n)
	}
	u.Set("old", 4, t0.Add(13*time.Hour)) // moved to the current generation
	u.Set("x", 1, t0.Add(24*time.Hour))   // a new generation drops the one before
	if a, b := u.Count("old"), u.Count("new"); a != 4 || b != 1 {
		t.Fatalf("after two generations: old=%d new=%d, want 4 and 1", a, b)
	}
	u.Set("y", 1, t0.Add(36*time.Hour))
	if n := u.Count("new"); n != 0 {
		t.Fatalf("entry two generations old counts %d, want 0", n)
	}

	// By size: a generation holds at most 8192 entries.
	var s settle.Unrun
	for i := range 3 * 8192 {
		s.Set(fmt.Sprint(i), 1, t0)
	}
	if first, last := s.Count("0"), s.Count(fmt.Sprint(3*8192-1)); first != 0 || last != 1 {
		t.Fatalf("after 3×8192 entries: first counts %d, last %d; want 0 and 1", first, last)
	}
}

// TestBehind: behind a retry a FIFO message is kept invisible for the
// retry's delay, capped as Decide caps it; behind anything else it is
// visible at once.
func TestBehind(t *testing.T) {
	t.Parallel()
	recv := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := recv.Add(time.Minute)
	for _, tc := range []struct {
		o     settle.Outcome
		delay time.Duration
		want  int32
	}{
		{settle.Retry, 90 * time.Second, 90},
		{settle.Retry, 1500 * time.Millisecond, 2},
		{settle.Retry, 13 * time.Hour, int32((12*time.Hour - 2*time.Minute) / time.Second)},
		{settle.Release, time.Minute, 0},
		{settle.Ack, time.Minute, 0},
	} {
		got := settle.Behind(tc.o, tc.delay, recv, now)
		if got.Done || got.Visibility != tc.want {
			t.Errorf("Behind(%d, %s) = %+v, want visibility %d", tc.o, tc.delay, got, tc.want)
		}
		if tc.o == settle.Retry {
			if d := settle.Decide(tc.o, tc.delay, recv, now); d != got {
				t.Errorf("Behind(%d, %s) = %+v, the retried message's own Decide %+v", tc.o, tc.delay, got, d)
			}
		}
	}
	for o, want := range map[settle.Outcome]bool{settle.Ack: false, settle.Duplicate: false, settle.DeadLetter: false, settle.Retry: true, settle.Release: true} {
		if got := settle.StopsGroup(o); got != want {
			t.Errorf("StopsGroup(%d) = %v, want %v", o, got, want)
		}
	}
}

// TestMaxReceiveCount: read as SQS writes it (a string or a number);
// anything else is 0, none.
func TestMaxReceiveCount(t *testing.T) {
	t.Parallel()
	for policy, want := range map[string]int{
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":"5"}`: 5,
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":12}`:  12,
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq"}`:                       0,
		`{"maxReceiveCount":"x"}`: 0,
		`not json`:                0,
		``:                        0,
	} {
		if got := settle.MaxReceiveCount(policy); got != want {
			t.Errorf("MaxReceiveCount(%q) = %d, want %d", policy, got, want)
		}
	}
	if settle.AtReceiveLimit(4, 5) || !settle.AtReceiveLimit(5, 5) || !settle.AtReceiveLimit(6, 5) || settle.AtReceiveLimit(100, 0) {
		t.Error("AtReceiveLimit: want true from the maxReceiveCount-th receive on, and never without one")
	}
}
