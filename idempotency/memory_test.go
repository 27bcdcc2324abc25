package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idemtest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	idemtest.Run(t, func(t *testing.T, now func() time.Time) idempotency.Store {
		return idempotency.NewMemory(idempotency.MemoryConfig{NowFunc: now})
	})
}

// TestMemoryRefusesWrites: the memory store cannot commit work attached to
// the request (DynamoDB writes), so it must not complete the record
// without it.
func TestMemoryRefusesWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := idempotency.NewMemory(idempotency.MemoryConfig{})
	c, err := s.Claim(ctx, "k", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Complete(ctx, "k", c.Token, idempotency.Completion{Work: []any{"a write"}})
	if !errors.Is(err, idempotency.ErrWorkUnsupported) {
		t.Fatalf("Complete with writes: %v, want ErrWorkUnsupported", err)
	}
	if got, _ := s.Claim(ctx, "k", "fp", time.Minute); got.Status != idempotency.InProgress {
		t.Fatalf("after a refused Complete: %s, want in_progress", got.Status)
	}
}

// TestMemorySweepsExpired: expired records are deleted as claims go on, so
// a long-running process does not keep every key forever.
func TestMemorySweepsExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := dedupetest.NewClock(time.Now())
	s := idempotency.NewMemory(idempotency.MemoryConfig{NowFunc: clock.Now})
	claim := func(prefix string, n int) {
		for i := range n {
			c, err := s.Claim(ctx, fmt.Sprint(prefix, i), "fp", time.Minute)
			if err != nil || c.Status != idempotency.Claimed {
				t.Fatalf("claim: %v %v", c, err)
			}
			if err := s.Complete(ctx, fmt.Sprint(prefix, i), c.Token, idempotency.Completion{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	claim("old-", 3000)
	clock.Advance(idempotency.DefaultTTL + time.Second)
	// Every call examines a few records: the 3000 expired ones are gone
	// long before 8000 keys are claimed and completed.
	claim("new-", 8000)
	if n := s.Len(); n != 8000 {
		t.Fatalf("%d records held, want the 8000 live ones (the 3000 expired swept)", n)
	}
	if c, _ := s.Claim(ctx, "new-1", "fp", time.Minute); c.Status != idempotency.Completed {
		t.Fatalf("a live record was swept: %s", c.Status)
	}
}

// TestMemoryExpiredClaimNotOwned: a claim whose record has expired is no
// longer its owner's (ErrNotOwner, as documented), whether or not a sweep
// has deleted the record yet: Extend must not bring it back.
func TestMemoryExpiredClaimNotOwned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := dedupetest.NewClock(time.Now())
	s := idempotency.NewMemory(idempotency.MemoryConfig{TTL: time.Hour, NowFunc: clock.Now})
	c, err := s.Claim(ctx, "k", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour + time.Second)
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"Extend", func() error { return s.Extend(ctx, "k", c.Token, time.Minute) }},
		{"Complete", func() error { return s.Complete(ctx, "k", c.Token, idempotency.Completion{}) }},
		{"Release", func() error { return s.Release(ctx, "k", c.Token) }},
	} {
		if err := call.do(); !errors.Is(err, idempotency.ErrNotOwner) {
			t.Errorf("%s of an expired claim: %v, want ErrNotOwner", call.name, err)
		}
	}
	if _, err := s.Lookup(ctx, "k"); !errors.Is(err, idempotency.ErrNoRecord) {
		t.Fatalf("Lookup after the calls: %v, want ErrNoRecord (the expired record stays expired)", err)
	}
}
