package dedupe

import (
	"cmp"
	"context"
	"time"

	"github.com/sqsonce/sqsonce/internal/memlease"
	"github.com/sqsonce/sqsonce/step"
)

// MemoryConfig configures a [Memory] store.
type MemoryConfig struct {
	// Namespace prefixes every key ("<namespace>#<key>", hashed past 2048
	// bytes). Defaults to "".
	Namespace string
	// TTL is how long a record lives after its last write. Defaults to
	// [DefaultTTL].
	TTL time.Duration
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Memory is an in-process [Store] with the same semantics as the DynamoDB
// store: for tests, and for a single process that needs no durability.
// Its zero value is not usable; call [NewMemory].
//
// Like DynamoDB's TTL, Memory forgets a record once its expires_at has
// passed: every call examines a few records (a cursor that goes round all
// of them) and deletes the expired ones, so the store holds at most about
// a third more records than are within their TTL, at a constant cost per
// call. An IN_PROGRESS record whose lease has ended (a crashed owner's)
// stays until it expires, as in DynamoDB.
type Memory struct {
	s *memlease.Store[struct{}]
}

var _ StepStore = (*Memory)(nil)

// NewMemory returns an empty in-memory Store.
func NewMemory(cfg MemoryConfig) *Memory {
	now := cfg.NowFunc
	if now == nil {
		now = time.Now
	}
	return &Memory{s: memlease.New[struct{}](memlease.Config{
		Namespace:          cfg.Namespace,
		TTL:                cmp.Or(cfg.TTL, DefaultTTL),
		Now:                now,
		LenientFingerprint: true,
		ErrNotOwner:        ErrNotOwner,
	})}
}

// Claim implements [Store].
func (m *Memory) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error) {
	r, err := m.s.Claim(ctx, key, fingerprint, lease)
	if err != nil {
		return Claim{}, err
	}
	c := Claim{Token: r.Token, LeaseUntil: r.LeaseUntil, Fingerprint: r.Fingerprint, Steps: r.Steps}
	switch r.Outcome {
	case memlease.Claimed:
		c.Status = Claimed
	case memlease.Completed:
		c.Status = Duplicate
	case memlease.InProgress:
		c.Status = InProgress
	case memlease.KeyReused:
		c.Status = KeyReused
	}
	return c, nil
}

// Extend implements [Store].
func (m *Memory) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	return m.s.Extend(ctx, key, token, lease)
}

// Complete implements [Store].
func (m *Memory) Complete(ctx context.Context, key, token string) error {
	return m.s.Complete(ctx, key, token, struct{}{})
}

// Release implements [Store].
func (m *Memory) Release(ctx context.Context, key, token string) error {
	return m.s.Release(ctx, key, token)
}

// SaveSteps implements [StepStore].
func (m *Memory) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	return m.s.SaveSteps(ctx, key, token, steps)
}

// Unknown implements [StepStore].
func (m *Memory) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	return m.s.Unknown(ctx, limit)
}

// Resolve implements [StepStore].
func (m *Memory) Resolve(ctx context.Context, key, name string, applied bool) error {
	return m.s.Resolve(ctx, key, name, applied)
}
