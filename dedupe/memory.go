package dedupe

import (
	"cmp"
	"context"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sqsonce/sqsonce/internal/leasekey"
	"github.com/sqsonce/sqsonce/internal/steprec"
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
	ns  string
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	index   map[string]int // pk → position in records
	records []memRecord
	cursor  int // the next record the sweep examines
}

type memRecord struct {
	pk          string
	status      string
	token       string
	fingerprint string
	leaseUntil  time.Time
	expiresAt   time.Time
	steps       map[string]step.Record
}

// sweepPerCall is how many records each call examines for expiry. A full
// round over n records takes n/sweepPerCall calls, during which at most as
// many records are added; so the records expired but not yet deleted are
// at most 2n/sweepPerCall: a quarter of the store.
const sweepPerCall = 8

var _ StepStore = (*Memory)(nil)

// NewMemory returns an empty in-memory Store.
func NewMemory(cfg MemoryConfig) *Memory {
	m := &Memory{
		ns:    cfg.Namespace,
		ttl:   cmp.Or(cfg.TTL, DefaultTTL),
		now:   cfg.NowFunc,
		index: map[string]int{},
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Claim implements [Store].
func (m *Memory) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return Claim{}, err
	}
	pk := leasekey.PK(m.ns, key)
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	r, ok := m.get(pk)
	// The same rule as the DynamoDB condition: absent, expired, or an
	// IN_PROGRESS claim of the same message whose lease has ended. Another
	// body never takes over: the crashed owner's effects are unknown, and
	// the key stays its message's until the record expires.
	same := r.fingerprint == "" || fingerprint == "" || r.fingerprint == fingerprint
	if !ok || r.expiresAt.Before(now) || (r.status == StatusInProgress && r.leaseUntil.Before(now) && same) {
		var steps map[string]step.Record
		if ok && !r.expiresAt.Before(now) {
			steps = r.steps // a takeover resumes from the steps recorded
		}
		r = memRecord{
			pk:          pk,
			status:      StatusInProgress,
			token:       leasekey.NewToken(),
			fingerprint: fingerprint,
			leaseUntil:  now.Add(lease),
			expiresAt:   now.Add(m.ttl),
			steps:       steps,
		}
		m.put(r)
		return Claim{Status: Claimed, Token: r.token, LeaseUntil: r.leaseUntil, Steps: maps.Clone(steps)}, nil
	}
	c := Claim{Fingerprint: r.fingerprint}
	switch {
	case !same:
		c.Status = KeyReused
	case r.status == StatusCompleted:
		c.Status = Duplicate
	default:
		c.Status = InProgress
		c.LeaseUntil = r.leaseUntil
	}
	return c, nil
}

// owned returns the IN_PROGRESS record held by token, or ErrNotOwner. An
// expired record is gone, whether or not the sweep has reached it yet.
func (m *Memory) owned(key, token string, now time.Time) (memRecord, error) {
	r, ok := m.get(leasekey.PK(m.ns, key))
	if !ok || r.token != token || r.status != StatusInProgress || r.expiresAt.Before(now) {
		return r, ErrNotOwner
	}
	return r, nil
}

// get returns the record of pk.
func (m *Memory) get(pk string) (memRecord, bool) {
	i, ok := m.index[pk]
	if !ok {
		return memRecord{}, false
	}
	return m.records[i], true
}

// put stores r, replacing the record of r.pk.
func (m *Memory) put(r memRecord) {
	if i, ok := m.index[r.pk]; ok {
		m.records[i] = r
		return
	}
	m.index[r.pk] = len(m.records)
	m.records = append(m.records, r)
}

// remove deletes the record at position i: the last record takes its place.
func (m *Memory) remove(i int) {
	delete(m.index, m.records[i].pk)
	last := len(m.records) - 1
	if i != last {
		m.records[i] = m.records[last]
		m.index[m.records[i].pk] = i
	}
	m.records[last] = memRecord{} // drop its strings
	m.records = m.records[:last]
	// After a burst, give the memory back: copy into a smaller slice and
	// index (amortized over the removals that emptied them).
	if c := cap(m.records); c > 1024 && len(m.records) < c/4 {
		m.records = append(make([]memRecord, 0, 2*len(m.records)), m.records...)
		m.index = make(map[string]int, len(m.records))
		for i, r := range m.records {
			m.index[r.pk] = i
		}
	}
}

// sweep examines the next sweepPerCall records and deletes the expired
// ones (the rule of Claim: expires_at before now).
func (m *Memory) sweep(now time.Time) {
	for range sweepPerCall {
		if len(m.records) == 0 {
			return
		}
		if m.cursor >= len(m.records) {
			m.cursor = 0
		}
		if m.records[m.cursor].expiresAt.Before(now) {
			m.remove(m.cursor) // the record moved here is examined next
		} else {
			m.cursor++
		}
	}
}

// Extend implements [Store].
func (m *Memory) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	r, err := m.owned(key, token, now)
	if err != nil {
		return err
	}
	r.leaseUntil = now.Add(lease)
	r.expiresAt = now.Add(m.ttl)
	m.put(r)
	return nil
}

// Complete implements [Store].
func (m *Memory) Complete(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	r, err := m.owned(key, token, now)
	if err != nil {
		return err
	}
	r.status = StatusCompleted
	r.leaseUntil = time.Time{}
	r.expiresAt = now.Add(m.ttl)
	m.put(r)
	return nil
}

// Release implements [Store].
func (m *Memory) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	r, err := m.owned(key, token, now)
	if err != nil {
		return err
	}
	if len(r.steps) > 0 {
		// Kept, its lease ended and its token retired: the next claim
		// resumes from its steps.
		r.leaseUntil = time.Time{}
		r.token = leasekey.NewToken()
		m.put(r)
		return nil
	}
	m.remove(m.index[r.pk])
	return nil
}

// SaveSteps implements [StepStore].
func (m *Memory) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	r, err := m.owned(key, token, now)
	if err != nil {
		return err
	}
	r.steps = maps.Clone(steps)
	r.expiresAt = now.Add(m.ttl)
	m.put(r)
	return nil
}

// Unknown implements [StepStore].
func (m *Memory) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []step.Unresolved
	prefix := m.ns + "#"
	for _, r := range m.records {
		name := steprec.UnknownStep(r.steps)
		if name == "" || r.expiresAt.Before(now) || !strings.HasPrefix(r.pk, prefix) {
			continue
		}
		out = append(out, step.Unresolved{
			Key: strings.TrimPrefix(r.pk, prefix), Step: name, Record: r.steps[name],
			Held: r.status == StatusInProgress && !r.leaseUntil.Before(now),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Resolve implements [StepStore].
func (m *Memory) Resolve(ctx context.Context, key, name string, applied bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.get(leasekey.PK(m.ns, key))
	if !ok || r.expiresAt.Before(now) || r.status != StatusInProgress || !step.Resolvable(r.steps[name]) {
		return step.ErrNotUnknown
	}
	if !r.leaseUntil.Before(now) {
		return step.ErrHeld
	}
	res := step.Resolution(r.steps[name], applied)
	res.At = now.UTC()
	r.steps = maps.Clone(r.steps)
	r.steps[name] = res
	r.expiresAt = now.Add(m.ttl)
	m.put(r)
	return nil
}
