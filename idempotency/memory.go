package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"time"

	"github.com/sqsonce/sqsonce/internal/memlease"
	"github.com/sqsonce/sqsonce/step"
)

// MemoryConfig configures a [Memory] store.
type MemoryConfig struct {
	// Namespace prefixes every key ("<namespace>#<key>", hashed past
	// 2048 bytes). Defaults to "".
	Namespace string
	// TTL is how long a record lives after its last write. Defaults to
	// [DefaultTTL] (24 hours).
	TTL time.Duration
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Memory is an in-process [Store] with the same semantics as the DynamoDB
// store, for tests and for a single process that needs no durability. It
// commits no work attached to a request ([ErrWorkUnsupported]). Its zero value
// is not usable; call [NewMemory].
//
// Like DynamoDB's TTL, Memory forgets a record once its expires_at has
// passed: every call examines a few records and deletes the expired ones,
// at a constant cost per call (the dedupe memory store's rule).
type Memory struct {
	s *memlease.Store[*Response]
}

var (
	_ StepStore = (*Memory)(nil)
	_ Lookuper  = (*Memory)(nil)
)

// NewMemory returns an empty in-memory Store.
func NewMemory(cfg MemoryConfig) *Memory {
	now := cfg.NowFunc
	if now == nil {
		now = time.Now
	}
	return &Memory{s: memlease.New[*Response](memlease.Config{
		Namespace:   cfg.Namespace,
		TTL:         cmp.Or(cfg.TTL, DefaultTTL),
		Now:         now,
		ErrNotOwner: ErrNotOwner,
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
		c.Status = Completed
		c.Response = cloneResponse(r.Value)
	case memlease.InProgress:
		c.Status = InProgress
	case memlease.KeyReused:
		c.Status = KeyReused
	}
	return c, nil
}

// Len returns how many records the store holds, expired ones not yet
// swept included.
func (m *Memory) Len() int { return m.s.Len() }

func cloneResponse(r *Response) *Response {
	if r == nil {
		return &Response{}
	}
	return &Response{Status: r.Status, Header: r.Header.Clone(), Body: bytes.Clone(r.Body), NotRetained: r.NotRetained}
}

// Extend implements [Store].
func (m *Memory) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	return m.s.Extend(ctx, key, token, lease)
}

// Complete implements [Store]. Work is not supported: with any, it
// returns [ErrWorkUnsupported] and changes nothing.
func (m *Memory) Complete(ctx context.Context, key, token string, c Completion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(c.Work) > 0 {
		return ErrWorkUnsupported
	}
	return m.s.Complete(ctx, key, token, cloneResponse(&c.Response))
}

// Lookup implements [Lookuper].
func (m *Memory) Lookup(ctx context.Context, key string) (Record, error) {
	r, ok, err := m.s.Lookup(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if !ok {
		return Record{}, ErrNoRecord
	}
	rec := Record{Status: r.Status, Fingerprint: r.Fingerprint, ExpiresAt: r.ExpiresAt, Steps: r.Steps}
	if r.Status == StatusCompleted {
		rec.Response = cloneResponse(r.Value)
	} else {
		rec.LeaseUntil = r.LeaseUntil
	}
	return rec, nil
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
