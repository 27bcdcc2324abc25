// Package dedupetest is the conformance suite every [dedupe.Store] passes.
//
//	func TestConformance(t *testing.T) {
//		dedupetest.Run(t, func(t *testing.T, now func() time.Time) dedupe.Store {
//			return dedupe.NewMemory(dedupe.MemoryConfig{NowFunc: now})
//		})
//	}
//
// A store that records steps (a dedupe.StepStore) also runs the step
// cases: steps survive a takeover and a release, are fenced by the token,
// and are listed and resolved for a person.
//
// The suite controls time: the store must read the clock only through the
// now function it is given. It moves that clock forward past leases and
// past the record TTL (by 1000 days), so a store under test must use a TTL
// shorter than that.
package dedupetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/internal/leasetest"
	"github.com/sqsonce/sqsonce/step"
)

// NewStore returns a fresh store whose clock is now. Each subtest calls it
// once; the store may share a table with others (keys are unique per
// subtest).
type NewStore func(t *testing.T, now func() time.Time) dedupe.Store

// Clock is a manual clock, safe for concurrent use: Now reads it, Advance
// moves it forward.
type Clock = leasetest.Clock

// NewClock returns a clock set to start.
func NewClock(start time.Time) *Clock { return leasetest.NewClock(start) }

// Key returns a unique key for one test.
func Key(prefix string) string { return leasetest.Key(prefix) }

// Run runs the conformance suite against stores made by newStore: the
// lease record's cases shared with the idempotency stores, then the
// dedupe store's own.
func Run(t *testing.T, newStore NewStore) {
	cfg := leasetest.Config{
		NewStore: func(t *testing.T, now func() time.Time) leasetest.Store {
			s := newStore(t, now)
			if ss, ok := s.(dedupe.StepStore); ok {
				return stepStore{store{s}, ss}
			}
			return store{s}
		},
		Key:         func() string { return Key("conformance") },
		ErrNotOwner: dedupe.ErrNotOwner,
	}
	leasetest.Run(t, cfg)

	t.Run("LongKey", func(t *testing.T) {
		t.Parallel()
		e := leasetest.Setup(t, cfg)
		e.Key += strings.Repeat("k", 3*leasekey.MaxKeyBytes)
		c := e.Claim(leasetest.FP, leasetest.Claimed)
		e.Complete(c.Token, "")
		e.Completed(leasetest.FP, "")
	})
}

// store shows a dedupe.Store to the shared cases: Duplicate is their
// Completed, and a completed record keeps no result.
type store struct{ s dedupe.Store }

func (s store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (leasetest.Claim, error) {
	c, err := s.s.Claim(ctx, key, fingerprint, lease)
	status := leasetest.Status(c.Status.String())
	if c.Status == dedupe.Duplicate {
		status = leasetest.Completed
	}
	return leasetest.Claim{Status: status, Token: c.Token, LeaseUntil: c.LeaseUntil, Fingerprint: c.Fingerprint, Steps: c.Steps}, err
}

func (s store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	return s.s.Extend(ctx, key, token, lease)
}

func (s store) Complete(ctx context.Context, key, token, _ string) error {
	return s.s.Complete(ctx, key, token)
}

func (s store) Release(ctx context.Context, key, token string) error {
	return s.s.Release(ctx, key, token)
}

// stepStore shows a dedupe.StepStore to the shared cases, step cases
// included.
type stepStore struct {
	store
	ss dedupe.StepStore
}

func (s stepStore) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	return s.ss.SaveSteps(ctx, key, token, steps)
}

func (s stepStore) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	return s.ss.Unknown(ctx, limit)
}

func (s stepStore) Resolve(ctx context.Context, key, name string, applied bool) error {
	return s.ss.Resolve(ctx, key, name, applied)
}
