package idempotency

import (
	"bytes"
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
type Memory struct {
	ns  string
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	records map[string]memRecord
	claims  int // since the last sweep
	sweepAt int // claims that trigger the next sweep
}

type memRecord struct {
	status      string
	token       string
	fingerprint string
	leaseUntil  time.Time
	expiresAt   time.Time
	resp        *Response
	steps       map[string]step.Record
}

var (
	_ StepStore = (*Memory)(nil)
	_ Lookuper  = (*Memory)(nil)
)

// NewMemory returns an empty in-memory Store.
func NewMemory(cfg MemoryConfig) *Memory {
	m := &Memory{
		ns:      cfg.Namespace,
		ttl:     cmp.Or(cfg.TTL, DefaultTTL),
		now:     cfg.NowFunc,
		records: map[string]memRecord{},
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
	r, ok := m.records[pk]
	// The DynamoDB store's condition: absent, expired, or an IN_PROGRESS
	// claim of the same request whose lease has ended. Another request
	// never takes over: the crashed owner's effects are unknown, and the
	// key stays its request's until the record expires.
	if !ok || r.expiresAt.Before(now) || (r.status == StatusInProgress && r.leaseUntil.Before(now) && r.fingerprint == fingerprint) {
		var steps map[string]step.Record
		if ok && !r.expiresAt.Before(now) {
			steps = r.steps // a takeover resumes from the steps recorded
		}
		r = memRecord{
			status:      StatusInProgress,
			token:       leasekey.NewToken(),
			fingerprint: fingerprint,
			leaseUntil:  now.Add(lease),
			expiresAt:   now.Add(m.ttl),
			steps:       steps,
		}
		m.records[pk] = r
		return Claim{Status: Claimed, Token: r.token, LeaseUntil: r.leaseUntil, Steps: maps.Clone(steps)}, nil
	}
	c := Claim{Fingerprint: r.fingerprint}
	switch {
	case r.fingerprint != fingerprint:
		c.Status = KeyReused
	case r.status == StatusCompleted:
		c.Status = Completed
		c.Response = cloneResponse(r.resp)
	default:
		c.Status = InProgress
		c.LeaseUntil = r.leaseUntil
	}
	return c, nil
}

// sweep deletes expired records once the claims since the last sweep
// reach the number of records it left (at least 1024): amortised O(1) per
// claim, and the map stays within about twice its live records.
func (m *Memory) sweep(now time.Time) {
	m.claims++
	if m.claims < max(1024, m.sweepAt) {
		return
	}
	for pk, r := range m.records {
		if r.expiresAt.Before(now) {
			delete(m.records, pk)
		}
	}
	m.claims, m.sweepAt = 0, len(m.records)
}

// Len returns how many records the store holds, expired ones not yet
// swept included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

func cloneResponse(r *Response) *Response {
	if r == nil {
		return &Response{}
	}
	return &Response{Status: r.Status, Header: r.Header.Clone(), Body: bytes.Clone(r.Body), NotRetained: r.NotRetained}
}

// owned returns the IN_PROGRESS record held by token, or ErrNotOwner.
func (m *Memory) owned(key, token string) (string, memRecord, error) {
	pk := leasekey.PK(m.ns, key)
	r, ok := m.records[pk]
	if !ok || r.token != token || r.status != StatusInProgress {
		return pk, r, ErrNotOwner
	}
	return pk, r, nil
}

// Extend implements [Store].
func (m *Memory) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	pk, r, err := m.owned(key, token)
	if err != nil {
		return err
	}
	r.leaseUntil = now.Add(lease)
	r.expiresAt = now.Add(m.ttl)
	m.records[pk] = r
	return nil
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
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	pk, r, err := m.owned(key, token)
	if err != nil {
		return err
	}
	r.status = StatusCompleted
	r.leaseUntil = time.Time{}
	r.expiresAt = now.Add(m.ttl)
	r.resp = cloneResponse(&c.Response)
	m.records[pk] = r
	return nil
}

// Lookup implements [Lookuper].
func (m *Memory) Lookup(ctx context.Context, key string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[leasekey.PK(m.ns, key)]
	if !ok || r.expiresAt.Before(now) {
		return Record{}, ErrNoRecord
	}
	rec := Record{Status: r.status, Fingerprint: r.fingerprint, ExpiresAt: r.expiresAt, Steps: maps.Clone(r.steps)}
	if r.status == StatusCompleted {
		rec.Response = cloneResponse(r.resp)
	} else {
		rec.LeaseUntil = r.leaseUntil
	}
	return rec, nil
}

// Release implements [Store].
func (m *Memory) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pk, r, err := m.owned(key, token)
	if err != nil {
		return err
	}
	if len(r.steps) > 0 {
		// Kept, its lease ended and its token retired: the next claim
		// resumes from its steps.
		r.leaseUntil = time.Time{}
		r.token = leasekey.NewToken()
		m.records[pk] = r
		return nil
	}
	delete(m.records, pk)
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
	pk, r, err := m.owned(key, token)
	if err != nil {
		return err
	}
	r.steps = maps.Clone(steps)
	r.expiresAt = now.Add(m.ttl)
	m.records[pk] = r
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
	for pk, r := range m.records {
		name := steprec.UnknownStep(r.steps)
		if name == "" || r.expiresAt.Before(now) || !strings.HasPrefix(pk, prefix) {
			continue
		}
		out = append(out, step.Unresolved{
			Key: strings.TrimPrefix(pk, prefix), Step: name, Record: r.steps[name],
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
	pk := leasekey.PK(m.ns, key)
	r, ok := m.records[pk]
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
	m.records[pk] = r
	return nil
}
