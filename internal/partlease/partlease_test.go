package partlease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/internal/partlease"
)

// fake keeps leases in a map; stolen partitions fail their renewal.
type fake struct {
	live    int
	leases  map[int]string // partition → owner, all live
	stolen  map[int]bool
	failAt  string
	dropped []int
}

func (f *fake) err(step string) error {
	if f.failAt == step {
		return errors.New(step + " failed")
	}
	return nil
}

func (f *fake) Register(context.Context, string, time.Time, time.Time) (int, error) {
	return f.live, f.err("register")
}

func (f *fake) Held(_ context.Context, owner string, _ time.Time) ([]int, error) {
	var ps []int
	// Any order: Acquire sorts.
	for p := 15; p >= 0; p-- {
		if f.leases[p] == owner {
			ps = append(ps, p)
		}
	}
	return ps, f.err("held")
}

func (f *fake) Drop(_ context.Context, _ string, ps []int) error {
	for _, p := range ps {
		delete(f.leases, p)
	}
	f.dropped = append(f.dropped, ps...)
	return f.err("drop")
}

func (f *fake) Renew(_ context.Context, owner string, ps []int, _, _ time.Time) ([]int, error) {
	var out []int
	for _, p := range ps {
		if f.stolen[p] {
			f.leases[p] = "thief"
			continue
		}
		out = append(out, p)
	}
	return out, f.err("renew")
}

func (f *fake) Take(_ context.Context, owner string, n int, _, _ time.Time) ([]int, error) {
	var out []int
	for p := range 16 {
		if len(out) == n {
			break
		}
		if _, ok := f.leases[p]; !ok {
			f.leases[p] = owner
			out = append(out, p)
		}
	}
	return out, f.err("take")
}

func leases(owners ...string) map[int]string {
	m := map[int]string{}
	for p, o := range owners {
		if o != "" {
			m[p] = o
		}
	}
	return m
}

func TestShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ partitions, live, want int }{
		{16, 0, 16}, {16, 1, 16}, {16, 2, 8}, {16, 3, 6}, {16, 5, 4}, {16, 16, 1}, {16, 40, 1}, {1, 3, 1},
	} {
		if got := partlease.Share(tc.partitions, tc.live); got != tc.want {
			t.Errorf("Share(%d, %d) = %d, want %d", tc.partitions, tc.live, got, tc.want)
		}
	}
}

// TestAcquire: the rule each store used to write out, on a fake.
func TestAcquire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		f           *fake
		want        string
		wantDropped string
	}{
		{name: "alone takes every partition, lowest first",
			f: &fake{live: 1, leases: leases()}, want: "[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]"},
		{name: "second relay takes the free half",
			f: &fake{live: 2, leases: leases("a", "a", "a", "a", "a", "a", "a", "a")}, want: "[8 9 10 11 12 13 14 15]"},
		{name: "over its share keeps the lowest and drops the rest",
			f: &fake{live: 4, leases: leases("me", "me", "me", "me", "me", "me")}, want: "[0 1 2 3]", wantDropped: "[4 5]"},
		{name: "a lease stolen during the renewal is made up from free partitions",
			f: &fake{live: 4, leases: leases("me", "me", "me", "me"), stolen: map[int]bool{1: true}}, want: "[0 2 3 4]"},
		{name: "nothing free: only what it renewed",
			f: &fake{live: 2, leases: leases("a", "a", "a", "a", "a", "a", "a", "a", "me", "b", "b", "b", "b", "b", "b", "b")}, want: "[8]"},
	} {
		got, err := partlease.Acquire(context.Background(), tc.f, "me", 16, time.Now(), time.Minute)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.name, got, err, tc.want)
		}
		if tc.wantDropped != "" && fmt.Sprint(tc.f.dropped) != tc.wantDropped {
			t.Errorf("%s: dropped %v, want %s", tc.name, tc.f.dropped, tc.wantDropped)
		}
	}
}

func TestAcquireFails(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"register", "held", "drop", "renew", "take"} {
		f := &fake{live: 4, leases: leases("me", "me", "me", "me", "me", "me"), stolen: map[int]bool{0: true}, failAt: step}
		if _, err := partlease.Acquire(context.Background(), f, "me", 16, time.Now(), time.Minute); err == nil {
			t.Errorf("%s failing: Acquire succeeded", step)
		}
	}
}

// TestCache: an owner's partitions are reused until a third of the lease
// is left, then acquired again; Forget drops them at once.
func TestCache(t *testing.T) {
	t.Parallel()
	var c partlease.Cache
	calls := 0
	acquire := func() ([]int, error) { calls++; return []int{calls}, nil }
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		at   time.Duration
		want string
	}{{0, "[1]"}, {19 * time.Second, "[1]"}, {20 * time.Second, "[2]"}, {39 * time.Second, "[2]"}} {
		got, _ := c.Partitions("r1", now.Add(tc.at), time.Minute, acquire)
		if fmt.Sprint(got) != tc.want {
			t.Errorf("at +%s: %v, want %s", tc.at, got, tc.want)
		}
	}
	c.Forget("r1")
	if got, _ := c.Partitions("r1", now.Add(39*time.Second), time.Minute, acquire); fmt.Sprint(got) != "[3]" {
		t.Errorf("after Forget: %v, want a fresh acquire", got)
	}
	if _, err := c.Partitions("r2", now, time.Minute, func() ([]int, error) { return nil, errors.New("down") }); err == nil {
		t.Error("a failed acquire was not returned")
	}
	if got, _ := c.Partitions("r2", now, time.Minute, acquire); fmt.Sprint(got) != "[4]" {
		t.Errorf("after a failed acquire: %v, want a fresh one (nothing cached)", got)
	}
}
