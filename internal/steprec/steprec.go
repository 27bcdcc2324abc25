// Package steprec is the step recorder that the dedupe and idempotency
// middlewares put in a handler's context (package step): the steps of one
// claimed record, read at its claim and saved whole through the store,
// fenced by the claim's token. It also carries the claim itself, for a
// transactional final step that completes the record in its own
// transaction (dedupe/dynamo.Transactional, dedupe/postgres.Transactional).
//
// docs/architecture.md ("Steps") describes the record's step states.
package steprec

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/sqsonce/sqsonce/step"
)

// SaveFunc writes a record's steps, replacing the stored ones, fenced by
// the claim's token.
type SaveFunc func(ctx context.Context, steps map[string]step.Record) error

// Recorder is the step.Recorder of one claim.
type Recorder struct {
	save    SaveFunc
	observe func(step.Event)

	mu      sync.Mutex
	steps   map[string]step.Record
	blocked *step.UnknownError
}

var (
	_ step.Recorder = (*Recorder)(nil)
	_ step.Observer = (*Recorder)(nil)
)

// New returns the recorder of a claim whose record holds steps (nil for
// none). observe, when not nil, gets every step event.
func New(steps map[string]step.Record, save SaveFunc, observe func(step.Event)) *Recorder {
	return &Recorder{steps: maps.Clone(steps), save: save, observe: observe}
}

// Load implements step.Recorder.
func (r *Recorder) Load(name string) (step.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.steps[name]
	return rec, ok
}

// Save implements step.Recorder: the whole set of steps is written, with
// name's state replaced (one write per step event; a handler has few
// steps). Saves are serialised.
func (r *Recorder) Save(ctx context.Context, name string, rec step.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := maps.Clone(r.steps)
	if next == nil {
		next = map[string]step.Record{}
	}
	next[name] = rec
	if err := r.save(ctx, next); err != nil {
		return err
	}
	r.steps = next
	return nil
}

// StepEvent implements step.Observer: it passes e on and remembers the
// first step whose outcome is unknown in this attempt.
func (r *Recorder) StepEvent(e step.Event) {
	if e.Fails {
		if u, ok := e.Err.(*step.UnknownError); ok {
			r.mu.Lock()
			// The run fails on the first; a parked one overrides (it is
			// what the next attempt would find).
			if r.blocked == nil || e.Kind == step.EventParked {
				r.blocked = u
			}
			r.mu.Unlock()
		}
	}
	if r.observe != nil {
		r.observe(e)
	}
}

// Blocked returns the step whose outcome became unknown in this attempt,
// nil when none did: the attempt must fail with it (retried, or parked),
// even if the handler swallowed Run's error.
func (r *Recorder) Blocked() *step.UnknownError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blocked
}

// Any reports whether the record holds steps.
func (r *Recorder) Any() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.steps) > 0
}

// UnknownStep is the step of steps to list for a person: the first, by
// name, whose status is unknown; "" when none.
func UnknownStep(steps map[string]step.Record) string {
	names := slices.Sorted(maps.Keys(steps))
	for _, n := range names {
		if steps[n].Status == step.StatusUnknown {
			return n
		}
	}
	return ""
}

// Encode is the JSON of steps, as the PostgreSQL stores keep it (jsonb);
// nil for none.
func Encode(steps map[string]step.Record) ([]byte, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(steps)
	if err != nil {
		return nil, fmt.Errorf("steps: encode: %w", err)
	}
	return b, nil
}

// Decode reads Encode's JSON; nil or empty is none.
func Decode(b []byte) (map[string]step.Record, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var steps map[string]step.Record
	if err := json.Unmarshal(b, &steps); err != nil {
		return nil, fmt.Errorf("steps: decode: %w", err)
	}
	return steps, nil
}

// Claim is the claim a middleware holds for the handler it runs, for a
// final step that completes the record in its own transaction.
type Claim struct {
	// Store is the store that made the claim; a transactional handler
	// completes it only when it is its own store.
	Store any
	// Key is the key as given to the store, Token the claim's token.
	Key, Token string

	mu         sync.Mutex
	completing int
	completed  bool
}

// Completing runs commit, a transaction that completes the record (the
// handler's final step), and records whether it did (committed). While it
// runs, and once it committed, a lease extension that finds the record no
// longer its own is the completion's doing, not a lost lease
// ([Claim.Settling]).
func (c *Claim) Completing(commit func() (committed bool, err error)) error {
	c.mu.Lock()
	c.completing++
	c.mu.Unlock()
	committed, err := commit()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.completing--
	if committed {
		c.completed = true
	}
	return err
}

// Completed reports whether the handler's transaction completed the
// record: the middleware must not complete it again.
func (c *Claim) Completed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.completed
}

// Settling reports whether a completing transaction runs or has
// committed.
func (c *Claim) Settling() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.completed || c.completing > 0
}

type claimKey struct{}

// WithClaim returns ctx carrying c.
func WithClaim(ctx context.Context, c *Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimFrom returns the claim of ctx made by store, nil when there is none
// (or another store made it).
func ClaimFrom(ctx context.Context, store any) *Claim {
	c, _ := ctx.Value(claimKey{}).(*Claim)
	if c == nil || c.Store != store {
		return nil
	}
	return c
}
