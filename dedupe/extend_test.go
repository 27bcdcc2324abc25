package dedupe

import (
	"context"
	"errors"
	"testing"
	"time"
)

// flakyStore fails Extend with err when set.
type flakyStore struct {
	Store
	err error
}

func (s *flakyStore) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	if s.err != nil {
		return s.err
	}
	return s.Store.Extend(ctx, key, token, lease)
}

func TestOwnerExtend(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	mem := NewMemory(MemoryConfig{NowFunc: clock})
	store := &flakyStore{Store: mem}
	m, err := New(Config{Store: store, Lease: 30 * time.Second, NowFunc: clock})
	if err != nil {
		t.Fatal(err)
	}
	mw := m.Wrap(nil).(*middleware)
	ctx := context.Background()
	c, err := mem.Claim(ctx, "k", "fp", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	o := &owner{m: mw, key: "k", token: c.Token, until: c.LeaseUntil, log: mw.opts.Logger}

	now = now.Add(20 * time.Second)
	if err := o.extend(ctx, ctx); err != nil {
		t.Fatalf("extend: %v", err)
	}
	if other, _ := mem.Claim(ctx, "k", "fp", time.Second); !other.LeaseUntil.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("lease not extended: %v", other.LeaseUntil)
	}

	// A transient failure inside the lease is tolerated...
	store.err = errors.New("throttled")
	now = now.Add(20 * time.Second)
	if err := o.extend(ctx, ctx); err != nil {
		t.Fatalf("transient extend failure within the lease: %v", err)
	}
	// ...but not once the lease has run out.
	now = now.Add(20 * time.Second)
	if err := o.extend(ctx, ctx); err == nil {
		t.Fatal("extend failures past the lease end: want lease lost")
	}

	// Taken over: the store says not ours.
	store.err = nil
	taken, _ := mem.Claim(ctx, "k", "fp", time.Minute)
	if taken.Status != Claimed {
		t.Fatalf("takeover: %s", taken.Status)
	}
	if err := o.extend(ctx, ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("extend after takeover: %v, want ErrNotOwner", err)
	}

	// After the handler returns, ticks do nothing.
	o.finish()
	if err := o.extend(ctx, ctx); err != nil {
		t.Fatalf("extend after finish: %v", err)
	}
}
