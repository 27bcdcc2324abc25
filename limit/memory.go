package limit

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemoryConfig configures a [Memory] store.
type MemoryConfig struct {
	// NowFunc is the store's clock. Defaults to time.Now.
	NowFunc func() time.Time
}

// Memory is a [Store] in this process's memory: limits shared by the
// goroutines of one process (tests, and several consumers in one
// program), not by a fleet. It is safe for concurrent use.
type Memory struct {
	now func() time.Time

	mu    sync.Mutex
	rates map[string]time.Time
	slots map[slotKey]map[string]time.Time // holder → expiry
}

type slotKey struct{ name, key string }

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory(cfg MemoryConfig) *Memory {
	m := &Memory{now: cfg.NowFunc, rates: map[string]time.Time{}, slots: map[slotKey]map[string]time.Time{}}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Reserve implements [RateStore].
func (m *Memory) Reserve(ctx context.Context, name string, req RateRequest) (RateLease, error) {
	if err := req.Check(); err != nil {
		return RateLease{}, err
	}
	if err := ctx.Err(); err != nil {
		return RateLease{}, fmt.Errorf("limit: reserve %q: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	next, ok := m.rates[name]
	lease, next := Reserve(next, ok, m.now(), req)
	m.rates[name] = next
	return lease, nil
}

// Acquire implements [SlotStore].
func (m *Memory) Acquire(ctx context.Context, s Slot, limit int, ttl time.Duration) (bool, error) {
	if err := s.Check(limit); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("limit: acquire a slot of %q: %w", s.Key, err)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := slotKey{s.Name, s.Key}
	held := m.slots[k]
	live := 0
	for h, exp := range held {
		if exp.After(now) {
			live++
		} else {
			delete(held, h) // expired: another holder's to take
		}
	}
	if live >= limit {
		return false, nil
	}
	if held == nil {
		held = map[string]time.Time{}
		m.slots[k] = held
	}
	held[s.Holder] = now.Add(ttl)
	return true, nil
}

// Extend implements [SlotStore].
func (m *Memory) Extend(ctx context.Context, s Slot, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("limit: extend a slot of %q: %w", s.Key, err)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	held := m.slots[slotKey{s.Name, s.Key}]
	if _, ok := held[s.Holder]; !ok {
		return fmt.Errorf("limit: extend a slot of %q: %w", s.Key, ErrLost)
	}
	held[s.Holder] = now.Add(ttl)
	return nil
}

// Release implements [SlotStore].
func (m *Memory) Release(ctx context.Context, s Slot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := slotKey{s.Name, s.Key}
	delete(m.slots[k], s.Holder)
	if len(m.slots[k]) == 0 {
		delete(m.slots, k)
	}
	return nil
}
