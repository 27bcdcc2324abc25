// Package memlease is the in-memory lease record that the dedupe and
// idempotency memory stores share: one record per key, claimed under a
// lease, fenced by the claim's token, then COMPLETED or released, and
// forgotten once it expires, with the same rules as the DynamoDB record
// (package dynamolease; docs/architecture.md describes the states). A
// record keeps a handler's steps (package step) across a takeover and a
// release.
//
// The stores keep their own public types; this package speaks in
// [Result] and [Record], and each store maps them to its own names. What a
// store keeps beside the record (the idempotency store's response) is its
// value V.
package memlease

import (
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

// Record statuses as stored.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
)

// Outcome is what a claim found.
type Outcome int

const (
	// Claimed: the caller owns the key until its lease ends.
	Claimed Outcome = iota + 1
	// Completed: the record is COMPLETED.
	Completed
	// InProgress: another owner holds the key until Result.LeaseUntil.
	InProgress
	// KeyReused: the record's fingerprint differs from the caller's.
	KeyReused
)

// Result is the answer to a claim.
type Result[V any] struct {
	Outcome Outcome
	// Token fences the claim (Claimed only).
	Token string
	// LeaseUntil is the caller's lease end when Claimed, the other owner's
	// when InProgress.
	LeaseUntil time.Time
	// Fingerprint is the stored record's fingerprint (all but Claimed).
	Fingerprint string
	// Value is the stored record's value (all but Claimed).
	Value V
	// Steps are the steps the record holds (Claimed): those of an earlier
	// attempt, when this claim took over a record whose lease had ended
	// or that was released. Nil for a fresh record.
	Steps map[string]step.Record
}

// Record is a live record as stored.
type Record[V any] struct {
	Status      string
	Fingerprint string
	// LeaseUntil is when the owner's lease ends (IN_PROGRESS only).
	LeaseUntil time.Time
	ExpiresAt  time.Time
	// Value is what Complete stored (COMPLETED only).
	Value V
	// Steps are the steps the record holds, nil for none.
	Steps map[string]step.Record
}

// Config is one store's rules.
type Config struct {
	// Namespace prefixes every key (see leasekey.PK).
	Namespace string
	// TTL is how long a record lives after its last write.
	TTL time.Duration
	// Now is the clock.
	Now func() time.Time
	// LenientFingerprint makes an empty fingerprint, given or stored,
	// match any (the dedupe store's rule: fingerprinting is optional
	// there). Otherwise fingerprints must be equal.
	LenientFingerprint bool
	// ErrNotOwner is the store's sentinel, returned by a fenced write whose
	// token no longer holds the key.
	ErrNotOwner error
}

// Store holds the records. Its zero value is not usable; call [New].
//
// Like DynamoDB's TTL, a Store forgets a record once its expires_at has
// passed: every write examines a few records (a cursor that goes round all
// of them) and deletes the expired ones, so the store holds at most about
// a third more records than are within their TTL, at a constant cost per
// call. An expired record counts as absent whether or not the cursor has
// reached it. An IN_PROGRESS record whose lease has ended (a crashed
// owner's) stays until it expires.
type Store[V any] struct {
	cfg Config

	mu      sync.Mutex
	index   map[string]int // pk → position in records
	records []record[V]
	cursor  int // the next record the sweep examines
}

type record[V any] struct {
	pk    string
	token string
	Record[V]
}

// sweepPerCall is how many records each call examines for expiry. A full
// round over n records takes n/sweepPerCall calls, during which at most as
// many records are added; so the records expired but not yet deleted are
// at most 2n/sweepPerCall: a quarter of the store.
const sweepPerCall = 8

// New returns an empty Store.
func New[V any](cfg Config) *Store[V] {
	return &Store[V]{cfg: cfg, index: map[string]int{}}
}

// Claim tries to take key for lease: it succeeds when there is no record,
// the record has expired, or the record is IN_PROGRESS with a lease that
// has ended and the same fingerprint (a takeover). Another fingerprint
// never takes over: the crashed owner's effects are unknown, and the key
// stays its request's until the record expires. The only error is ctx's.
func (s *Store[V]) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Result[V], error) {
	if err := ctx.Err(); err != nil {
		return Result[V]{}, err
	}
	pk := leasekey.PK(s.cfg.Namespace, key)
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	r, ok := s.live(pk, now)
	same := r.Fingerprint == fingerprint || (s.cfg.LenientFingerprint && (r.Fingerprint == "" || fingerprint == ""))
	if !ok || (r.Status == StatusInProgress && r.LeaseUntil.Before(now) && same) {
		// A takeover resumes from the steps recorded (none when absent).
		r = record[V]{pk: pk, token: leasekey.NewToken(), Record: Record[V]{
			Status:      StatusInProgress,
			Fingerprint: fingerprint,
			LeaseUntil:  now.Add(lease),
			ExpiresAt:   now.Add(s.cfg.TTL),
			Steps:       r.Steps,
		}}
		s.put(r)
		return Result[V]{Outcome: Claimed, Token: r.token, LeaseUntil: r.LeaseUntil, Steps: maps.Clone(r.Steps)}, nil
	}
	res := Result[V]{Fingerprint: r.Fingerprint, Value: r.Value}
	switch {
	case !same:
		res.Outcome = KeyReused
	case r.Status == StatusCompleted:
		res.Outcome = Completed
	default:
		res.Outcome = InProgress
		res.LeaseUntil = r.LeaseUntil
	}
	return res, nil
}

// Extend moves the lease of the claim holding token to now+lease, and its
// expiry to now+TTL.
func (s *Store[V]) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	return s.fenced(ctx, key, token, func(r *record[V], now time.Time) bool {
		r.LeaseUntil = now.Add(lease)
		r.ExpiresAt = now.Add(s.cfg.TTL)
		return true
	})
}

// Complete marks the claim holding token COMPLETED with v, expiring at
// now+TTL.
func (s *Store[V]) Complete(ctx context.Context, key, token string, v V) error {
	return s.fenced(ctx, key, token, func(r *record[V], now time.Time) bool {
		r.Status = StatusCompleted
		r.LeaseUntil = time.Time{}
		r.ExpiresAt = now.Add(s.cfg.TTL)
		r.Value = v
		return true
	})
}

// Release deletes the IN_PROGRESS claim holding token. A record that
// holds steps is kept instead, its lease ended and its token retired: the
// next claim takes it over at once and resumes from its steps.
func (s *Store[V]) Release(ctx context.Context, key, token string) error {
	return s.fenced(ctx, key, token, func(r *record[V], _ time.Time) bool {
		if len(r.Steps) == 0 {
			return false
		}
		r.LeaseUntil = time.Time{}
		r.token = leasekey.NewToken()
		return true
	})
}

// SaveSteps replaces the steps of the claim holding token, and moves its
// expiry to now+TTL.
func (s *Store[V]) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	return s.fenced(ctx, key, token, func(r *record[V], now time.Time) bool {
		r.Steps = maps.Clone(steps)
		r.ExpiresAt = now.Add(s.cfg.TTL)
		return true
	})
}

// Unknown lists up to limit (0: all) live records of the store's
// namespace with a step whose outcome is unknown, by key.
func (s *Store[V]) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []step.Unresolved
	prefix := s.cfg.Namespace + "#"
	for _, r := range s.records {
		name := steprec.UnknownStep(r.Steps)
		if name == "" || r.ExpiresAt.Before(now) || !strings.HasPrefix(r.pk, prefix) {
			continue
		}
		out = append(out, step.Unresolved{
			Key: strings.TrimPrefix(r.pk, prefix), Step: name, Record: r.Steps[name],
			Held: r.Status == StatusInProgress && !r.LeaseUntil.Before(now),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Resolve records a person's decision on step name of key's record (see
// step.Resolution): the record must be live and IN_PROGRESS with the
// step resolvable ([step.ErrNotUnknown]), and its lease ended
// ([step.ErrHeld]).
func (s *Store[V]) Resolve(ctx context.Context, key, name string, applied bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(leasekey.PK(s.cfg.Namespace, key), now)
	if !ok || r.Status != StatusInProgress || !step.Resolvable(r.Steps[name]) {
		return step.ErrNotUnknown
	}
	if !r.LeaseUntil.Before(now) {
		return step.ErrHeld
	}
	res := step.Resolution(r.Steps[name], applied)
	res.At = now.UTC()
	r.Steps = maps.Clone(r.Steps)
	r.Steps[name] = res
	r.ExpiresAt = now.Add(s.cfg.TTL)
	s.put(r)
	return nil
}

// fenced applies update to the live IN_PROGRESS record held by token, or
// deletes the record when update returns false; otherwise it returns
// ErrNotOwner.
func (s *Store[V]) fenced(ctx context.Context, key, token string, update func(r *record[V], now time.Time) (keep bool)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pk := leasekey.PK(s.cfg.Namespace, key)
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	r, ok := s.live(pk, now)
	if !ok || r.token != token || r.Status != StatusInProgress {
		return s.cfg.ErrNotOwner
	}
	if !update(&r, now) {
		s.remove(s.index[pk])
		return nil
	}
	s.put(r)
	return nil
}

// Lookup returns the live record of key, without changing anything. Its
// steps are a copy.
func (s *Store[V]) Lookup(ctx context.Context, key string) (Record[V], bool, error) {
	if err := ctx.Err(); err != nil {
		return Record[V]{}, false, err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(leasekey.PK(s.cfg.Namespace, key), now)
	r.Steps = maps.Clone(r.Steps)
	return r.Record, ok, nil
}

// Len returns how many records the store holds, expired ones not yet
// swept included.
func (s *Store[V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// live returns the record of pk unless there is none or it has expired.
func (s *Store[V]) live(pk string, now time.Time) (record[V], bool) {
	i, ok := s.index[pk]
	if !ok || s.records[i].ExpiresAt.Before(now) {
		return record[V]{}, false
	}
	return s.records[i], true
}

// put stores r, replacing the record of r.pk.
func (s *Store[V]) put(r record[V]) {
	if i, ok := s.index[r.pk]; ok {
		s.records[i] = r
		return
	}
	s.index[r.pk] = len(s.records)
	s.records = append(s.records, r)
}

// remove deletes the record at position i: the last record takes its place.
func (s *Store[V]) remove(i int) {
	delete(s.index, s.records[i].pk)
	last := len(s.records) - 1
	if i != last {
		s.records[i] = s.records[last]
		s.index[s.records[i].pk] = i
	}
	s.records[last] = record[V]{} // drop its strings and value
	s.records = s.records[:last]
	// After a burst, give the memory back: copy into a smaller slice and
	// index (amortized over the removals that emptied them).
	if c := cap(s.records); c > 1024 && len(s.records) < c/4 {
		s.records = append(make([]record[V], 0, 2*len(s.records)), s.records...)
		s.index = make(map[string]int, len(s.records))
		for i, r := range s.records {
			s.index[r.pk] = i
		}
	}
}

// sweep examines the next sweepPerCall records and deletes the expired
// ones (expires_at before now, the rule of live).
func (s *Store[V]) sweep(now time.Time) {
	for range sweepPerCall {
		if len(s.records) == 0 {
			return
		}
		if s.cursor >= len(s.records) {
			s.cursor = 0
		}
		if s.records[s.cursor].ExpiresAt.Before(now) {
			s.remove(s.cursor) // the record moved here is examined next
		} else {
			s.cursor++
		}
	}
}
