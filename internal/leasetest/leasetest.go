// Package leasetest holds the conformance cases of the lease record that
// package dedupe and package idempotency share (docs/architecture.md, the
// dedupe record): one record per key, claimed under a lease, fenced by the
// claim's token, completed, and expiring. Each case is written once here;
// dedupetest and idemtest run every one of them against their store
// through a small adapter ([Store]), next to the cases of their own.
package leasetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/step"
)

// Status is a claim's answer in the words both record models share
// (dedupe's Duplicate is Completed here).
type Status string

// The statuses a claim may answer.
const (
	Claimed    Status = "claimed"
	Completed  Status = "completed"
	InProgress Status = "in_progress"
	KeyReused  Status = "key_reused"
)

// Claim is a store's answer to Claim in the shared vocabulary.
type Claim struct {
	Status      Status
	Token       string
	LeaseUntil  time.Time
	Fingerprint string
	// Result names what the completing Complete stored (Completed only,
	// and only from a store with Config.Results).
	Result string
	// Steps are the steps the claim took over (Claimed by a StepStore).
	Steps map[string]step.Record
}

// StepStore is a store under test that records steps (package step); the
// step cases run only against one.
type StepStore interface {
	Store
	SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error
	Unknown(ctx context.Context, limit int) ([]step.Unresolved, error)
	Resolve(ctx context.Context, key, name string, applied bool) error
}

// Store is a store under test seen through its suite's adapter.
type Store interface {
	Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error)
	Extend(ctx context.Context, key, token string, lease time.Duration) error
	// Complete completes the claim holding token, storing the result
	// named result (a store without results ignores the name).
	Complete(ctx context.Context, key, token, result string) error
	Release(ctx context.Context, key, token string) error
}

// Config is what a suite tells the shared cases about its store.
type Config struct {
	// NewStore returns a fresh store whose clock is now. Each case calls
	// it once; stores may share a table (keys are unique per case).
	NewStore func(t *testing.T, now func() time.Time) Store
	// Key returns a fresh key, as the store receives keys.
	Key func() string
	// ErrNotOwner is the store's error for a token that no longer holds
	// the key.
	ErrNotOwner error
	// Results reports that the store keeps a result with a completed
	// record and returns it with later claims (Claim.Result).
	Results bool
}

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock set to start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Key returns a unique key for one test.
func Key(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

const (
	// Lease is the lease every case claims for.
	Lease = 30 * time.Second
	// FP and FPB are two different fingerprints.
	FP  = "fingerprint-a"
	FPB = "fingerprint-b"
	// farFuture is past any record TTL a store under test uses.
	farFuture = 1000 * 24 * time.Hour
	// withinTTL is past any lease and within every store's TTL (the
	// idempotency record's 24 hours is the shortest).
	withinTTL = 23 * time.Hour
)

// Env is one case's store, clock and key, with the assertions the cases
// share. A suite's own cases use it too (see [Setup]).
type Env struct {
	T     *testing.T
	Ctx   context.Context
	Clock *Clock
	Store Store
	Key   string
	cfg   Config
}

// Setup returns a fresh store with its own clock and key.
func Setup(t *testing.T, cfg Config) *Env {
	t.Helper()
	// A wall-clock start keeps stores that compare with server-side data
	// meaningful; the cases only ever move it forward.
	clock := NewClock(time.Now().Truncate(time.Millisecond))
	return &Env{T: t, Ctx: context.Background(), Clock: clock, Store: cfg.NewStore(t, clock.Now), Key: cfg.Key(), cfg: cfg}
}

// Claim claims the key for fingerprint and fails the test unless the
// answer is want.
func (e *Env) Claim(fingerprint string, want Status) Claim {
	e.T.Helper()
	c, err := e.Store.Claim(e.Ctx, e.Key, fingerprint, Lease)
	if err != nil {
		e.T.Fatalf("Claim: %v", err)
	}
	if c.Status != want {
		e.T.Fatalf("Claim: status %s, want %s (%+v)", c.Status, want, c)
	}
	if want == Claimed && c.Token == "" {
		e.T.Fatalf("Claim: claimed without a token")
	}
	return c
}

// Completed claims the key for fingerprint and fails the test unless the
// record is COMPLETED with the result named result.
func (e *Env) Completed(fingerprint, result string) Claim {
	e.T.Helper()
	c := e.Claim(fingerprint, Completed)
	if e.cfg.Results && c.Result != result {
		e.T.Fatalf("Claim: completed with result %q, want %q", c.Result, result)
	}
	return c
}

// Complete completes the claim holding token with result and fails the
// test on an error.
func (e *Env) Complete(token, result string) {
	e.T.Helper()
	if err := e.Store.Complete(e.Ctx, e.Key, token, result); err != nil {
		e.T.Fatalf("Complete: %v", err)
	}
}

// NotOwner fails the test unless err is the store's ErrNotOwner.
func (e *Env) NotOwner(what string, err error) {
	e.T.Helper()
	if !errors.Is(err, e.cfg.ErrNotOwner) {
		e.T.Fatalf("%s by a stale owner: %v, want ErrNotOwner", what, err)
	}
}

// Run runs every shared case, each a parallel subtest of t, and the step
// cases when the store records steps (a StepStore).
func Run(t *testing.T, cfg Config) {
	all := cases
	if _, ok := cfg.NewStore(t, time.Now).(StepStore); ok {
		all = append(all[:len(all):len(all)], stepCases...)
	}
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(Setup(t, cfg))
		})
	}
}

var cases = []struct {
	name string
	run  func(e *Env)
}{
	{"FirstClaimWins", firstClaimWins},
	{"RaceOneKey", raceOneKey},
	{"CompleteIsFinal", completeIsFinal},
	{"ExtendKeepsLease", extendKeepsLease},
	{"TakeoverAfterLeaseEnds", takeoverAfterLeaseEnds},
	{"TakeoverChecksFingerprint", takeoverChecksFingerprint},
	{"ReleaseLetsNextClaimRun", releaseLetsNextClaimRun},
	{"UnknownToken", unknownToken},
	{"ExpiryAllowsNewClaim", expiryAllowsNewClaim},
	{"FingerprintMismatch", fingerprintMismatch},
	{"KeysAreIndependent", keysAreIndependent},
}

// firstClaimWins: the first claim owns the key; until its lease ends any
// other claim learns when it ends, and never the owner's token.
func firstClaimWins(e *Env) {
	c := e.Claim(FP, Claimed)
	if want := e.Clock.Now().Add(Lease); !c.LeaseUntil.Equal(want) {
		e.T.Errorf("LeaseUntil = %v, want %v", c.LeaseUntil, want)
	}
	for _, wait := range []time.Duration{0, Lease - time.Second} {
		e.Clock.Advance(wait)
		got := e.Claim(FP, InProgress)
		if !got.LeaseUntil.Equal(c.LeaseUntil) {
			e.T.Errorf("InProgress %v after the claim: LeaseUntil = %v, want the owner's %v", wait, got.LeaseUntil, c.LeaseUntil)
		}
		if got.Token != "" {
			e.T.Errorf("InProgress %v after the claim leaked the owner's token", wait)
		}
	}
}

func raceOneKey(e *Env) {
	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[Status]int{}
		errs     []error
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			c, err := e.Store.Claim(e.Ctx, e.Key, FP, Lease)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			statuses[c.Status]++
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		e.T.Fatalf("%d claims failed, first: %v", len(errs), errs[0])
	}
	if statuses[Claimed] != 1 || statuses[InProgress] != n-1 {
		e.T.Fatalf("racing claims: %v, want exactly 1 claimed and %d in progress", statuses, n-1)
	}
}

// completeIsFinal: a completed record stays completed, with its result,
// and its owner can no longer touch it.
func completeIsFinal(e *Env) {
	c := e.Claim(FP, Claimed)
	e.Complete(c.Token, "first")
	got := e.Completed(FP, "first")
	if got.Fingerprint != FP {
		e.T.Errorf("Completed Fingerprint = %q, want %q", got.Fingerprint, FP)
	}
	// Still completed long after any lease.
	e.Clock.Advance(withinTTL)
	e.Completed(FP, "first")
	e.NotOwner("Release after Complete", e.Store.Release(e.Ctx, e.Key, c.Token))
	e.NotOwner("Extend after Complete", e.Store.Extend(e.Ctx, e.Key, c.Token, Lease))
	// A second Complete by the same token may succeed (a store may take it
	// for its own retried write) but must change nothing.
	if err := e.Store.Complete(e.Ctx, e.Key, c.Token, "second"); err != nil && !errors.Is(err, e.cfg.ErrNotOwner) {
		e.T.Fatalf("Complete twice: %v, want nil or ErrNotOwner", err)
	}
	e.Completed(FP, "first")
}

func extendKeepsLease(e *Env) {
	c := e.Claim(FP, Claimed)
	for range 3 {
		e.Clock.Advance(Lease - 5*time.Second)
		if err := e.Store.Extend(e.Ctx, e.Key, c.Token, Lease); err != nil {
			e.T.Fatalf("Extend: %v", err)
		}
		got := e.Claim(FP, InProgress)
		if want := e.Clock.Now().Add(Lease); !got.LeaseUntil.Equal(want) {
			e.T.Fatalf("after Extend LeaseUntil = %v, want %v", got.LeaseUntil, want)
		}
	}
	e.Complete(c.Token, "extended")
	e.Completed(FP, "extended")
}

func takeoverAfterLeaseEnds(e *Env) {
	old := e.Claim(FP, Claimed)
	e.Clock.Advance(Lease + time.Second)
	cur := e.Claim(FP, Claimed)
	if cur.Token == old.Token {
		e.T.Fatalf("takeover reused the old token")
	}
	// The stale owner can touch nothing.
	e.NotOwner("Extend", e.Store.Extend(e.Ctx, e.Key, old.Token, Lease))
	e.NotOwner("Complete", e.Store.Complete(e.Ctx, e.Key, old.Token, "stale"))
	e.NotOwner("Release", e.Store.Release(e.Ctx, e.Key, old.Token))
	// The new owner still holds the key, then completes it.
	e.Claim(FP, InProgress)
	if err := e.Store.Extend(e.Ctx, e.Key, cur.Token, Lease); err != nil {
		e.T.Fatalf("new owner's Extend: %v", err)
	}
	e.Complete(cur.Token, "new owner")
	e.NotOwner("Complete after the new owner completed", e.Store.Complete(e.Ctx, e.Key, old.Token, "stale"))
	e.NotOwner("Release after the new owner completed", e.Store.Release(e.Ctx, e.Key, old.Token))
	e.Completed(FP, "new owner")
}

// takeoverChecksFingerprint: a lease that ended does not end the record.
// The crashed owner's attempt may have had effects, so the key still
// belongs to its request: another fingerprint is key reuse, the same one
// takes over. Only expiry frees the key for another request.
func takeoverChecksFingerprint(e *Env) {
	old := e.Claim(FP, Claimed)
	e.Clock.Advance(Lease + time.Second)
	got := e.Claim(FPB, KeyReused)
	if got.Fingerprint != FP {
		e.T.Errorf("KeyReused Fingerprint = %q, want the stored %q", got.Fingerprint, FP)
	}
	// The refused claim changed nothing: the original request's retry
	// takes over, and the stale owner is fenced out.
	cur := e.Claim(FP, Claimed)
	e.NotOwner("Complete", e.Store.Complete(e.Ctx, e.Key, old.Token, "stale"))
	e.Clock.Advance(Lease + time.Second)
	e.Claim(FPB, KeyReused)
	e.Complete(cur.Token, "retry")
	e.Completed(FP, "retry")
	e.Claim(FPB, KeyReused)
	// An expired record, whatever its state, frees the key.
	abandoned := *e
	abandoned.Key = e.Key + "-abandoned"
	abandoned.Claim(FP, Claimed)
	e.Clock.Advance(farFuture)
	abandoned.Claim(FPB, Claimed)
	e.Claim(FPB, Claimed)
}

func releaseLetsNextClaimRun(e *Env) {
	c := e.Claim(FP, Claimed)
	if err := e.Store.Release(e.Ctx, e.Key, c.Token); err != nil {
		e.T.Fatalf("Release: %v", err)
	}
	// No waiting for the lease, and another body may use the key.
	next := e.Claim(FPB, Claimed)
	e.NotOwner("Release twice", e.Store.Release(e.Ctx, e.Key, c.Token))
	e.NotOwner("Complete after Release", e.Store.Complete(e.Ctx, e.Key, c.Token, "released"))
	e.Complete(next.Token, "next")
	e.Completed(FPB, "next")
}

func unknownToken(e *Env) {
	e.NotOwner("Extend of an absent key", e.Store.Extend(e.Ctx, e.Key, "nope", Lease))
	e.NotOwner("Complete of an absent key", e.Store.Complete(e.Ctx, e.Key, "nope", "nope"))
	e.NotOwner("Release of an absent key", e.Store.Release(e.Ctx, e.Key, "nope"))
	e.Claim(FP, Claimed)
	e.NotOwner("Extend with a wrong token", e.Store.Extend(e.Ctx, e.Key, "nope", Lease))
	e.NotOwner("Complete with a wrong token", e.Store.Complete(e.Ctx, e.Key, "nope", "nope"))
	e.NotOwner("Release with a wrong token", e.Store.Release(e.Ctx, e.Key, "nope"))
	e.Claim(FP, InProgress)
}

func expiryAllowsNewClaim(e *Env) {
	c := e.Claim(FP, Claimed)
	e.Complete(c.Token, "expired")
	e.Clock.Advance(farFuture)
	// Expired, even if the item is still there (TTL deletion lags): a new
	// body may use the key too.
	e.Claim(FPB, Claimed)
}

func fingerprintMismatch(e *Env) {
	c := e.Claim(FP, Claimed)
	got := e.Claim(FPB, KeyReused)
	if got.Fingerprint != FP {
		e.T.Errorf("KeyReused Fingerprint = %q, want the stored %q", got.Fingerprint, FP)
	}
	e.Complete(c.Token, "a")
	e.Claim(FPB, KeyReused)
	e.Completed(FP, "a")
}

// keysAreIndependent: a key that extends another is a key of its own.
func keysAreIndependent(e *Env) {
	e.Claim(FP, Claimed)
	other := *e
	other.Key = e.Key + "-other"
	other.Claim(FPB, Claimed)
	e.Claim(FP, InProgress)
}
