// Package idemtest is the conformance suite every [idempotency.Store]
// passes.
//
//	func TestConformance(t *testing.T) {
//		idemtest.Run(t, func(t *testing.T, now func() time.Time) idempotency.Store {
//			return idempotency.NewMemory(idempotency.MemoryConfig{NowFunc: now})
//		})
//	}
//
// The suite controls time: the store must read the clock only through the
// now function it is given. It moves that clock forward past leases and
// past the record TTL (by 1000 days), so a store under test must use a TTL
// shorter than that.
package idemtest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/idempotency"
)

// NewStore returns a fresh store whose clock is now. Each subtest calls it
// once; the store may share a table with others (keys are unique per
// subtest).
type NewStore func(t *testing.T, now func() time.Time) idempotency.Store

const (
	lease = 30 * time.Second
	fp    = "fingerprint-a"
	fpB   = "fingerprint-b"
	// farFuture is past any record TTL a store under test uses.
	farFuture = 1000 * 24 * time.Hour
)

// Response is the response the suite stores: several headers, a repeated
// one, and a body that is not valid UTF-8.
func Response() idempotency.Response {
	return idempotency.Response{
		Status: http.StatusCreated,
		Header: http.Header{
			"Content-Type": {"application/json"},
			"Location":     {"/credits/c-1"},
			"Link":         {"</a>; rel=a", "</b>; rel=b"},
		},
		Body: []byte("{\"id\":\"c-1\"}\n\x00\xff\xfe binary tail"),
	}
}

type env struct {
	t     *testing.T
	ctx   context.Context
	clock *dedupetest.Clock
	store idempotency.Store
	key   string
}

func setup(t *testing.T, newStore NewStore) *env {
	t.Helper()
	clock := dedupetest.NewClock(time.Now().Truncate(time.Millisecond))
	return &env{t: t, ctx: context.Background(), clock: clock, store: newStore(t, clock.Now),
		key: idempotency.RecordKey("scope", dedupetest.Key("conformance"))}
}

func (e *env) claim(fingerprint string, want idempotency.Status) idempotency.Claim {
	e.t.Helper()
	c, err := e.store.Claim(e.ctx, e.key, fingerprint, lease)
	if err != nil {
		e.t.Fatalf("Claim: %v", err)
	}
	if c.Status != want {
		e.t.Fatalf("Claim: status %s, want %s (%+v)", c.Status, want, c)
	}
	if want == idempotency.Claimed && c.Token == "" {
		e.t.Fatalf("Claim: claimed without a token")
	}
	if want != idempotency.Completed && c.Response != nil {
		e.t.Fatalf("Claim: status %s came with a response", c.Status)
	}
	return c
}

func (e *env) complete(token string, resp idempotency.Response) {
	e.t.Helper()
	if err := e.store.Complete(e.ctx, e.key, token, idempotency.Completion{Response: resp}); err != nil {
		e.t.Fatalf("Complete: %v", err)
	}
}

func (e *env) notOwner(what string, err error) {
	e.t.Helper()
	if !errors.Is(err, idempotency.ErrNotOwner) {
		e.t.Fatalf("%s by a stale owner: %v, want ErrNotOwner", what, err)
	}
}

func sameResponse(t *testing.T, got *idempotency.Response, want idempotency.Response) {
	t.Helper()
	if got == nil {
		t.Fatalf("completed claim without a response")
	}
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("stored response %d %q, want %d %q", got.Status, got.Body, want.Status, want.Body)
	}
	if len(got.Header) != 0 || len(want.Header) != 0 {
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("stored headers %v, want %v", got.Header, want.Header)
		}
	}
}

// Run runs the conformance suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	t.Run("FirstClaimWins", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, idempotency.Claimed)
		if want := e.clock.Now().Add(lease); !c.LeaseUntil.Equal(want) {
			t.Errorf("LeaseUntil = %v, want %v", c.LeaseUntil, want)
		}
		got := e.claim(fp, idempotency.InProgress)
		if !got.LeaseUntil.Equal(c.LeaseUntil) {
			t.Errorf("InProgress LeaseUntil = %v, want the owner's %v", got.LeaseUntil, c.LeaseUntil)
		}
		if got.Token != "" {
			t.Errorf("InProgress leaked the owner's token")
		}
	})

	t.Run("RaceOneKey", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		const n = 50
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			statuses = map[idempotency.Status]int{}
			errs     []error
		)
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				<-start
				c, err := e.store.Claim(e.ctx, e.key, fp, lease)
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
			t.Fatalf("%d claims failed, first: %v", len(errs), errs[0])
		}
		if statuses[idempotency.Claimed] != 1 || statuses[idempotency.InProgress] != n-1 {
			t.Fatalf("racing claims: %v, want exactly 1 claimed and %d in progress", statuses, n-1)
		}
	})

	t.Run("CompletedReplaysResponse", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, idempotency.Claimed)
		want := Response()
		e.complete(c.Token, want)
		got := e.claim(fp, idempotency.Completed)
		sameResponse(t, got.Response, want)
		if got.Fingerprint != fp {
			t.Errorf("Completed Fingerprint = %q, want %q", got.Fingerprint, fp)
		}
		// Still completed long after any lease, within the TTL.
		e.clock.Advance(23 * time.Hour)
		sameResponse(t, e.claim(fp, idempotency.Completed).Response, want)
		e.notOwner("Release after Complete", e.store.Release(e.ctx, e.key, c.Token))
		e.notOwner("Extend after Complete", e.store.Extend(e.ctx, e.key, c.Token, lease))
		// A second Complete by the same token may succeed (a store may take
		// it for its own retried write) but must change nothing.
		if err := e.store.Complete(e.ctx, e.key, c.Token, idempotency.Completion{Response: idempotency.Response{Status: 500}}); err != nil && !errors.Is(err, idempotency.ErrNotOwner) {
			t.Fatalf("Complete twice: %v, want nil or ErrNotOwner", err)
		}
		sameResponse(t, e.claim(fp, idempotency.Completed).Response, want)
	})

	t.Run("EmptyResponse", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, idempotency.Claimed)
		want := idempotency.Response{Status: http.StatusNoContent}
		e.complete(c.Token, want)
		sameResponse(t, e.claim(fp, idempotency.Completed).Response, want)
	})

	t.Run("ExtendKeepsLease", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, idempotency.Claimed)
		for range 3 {
			e.clock.Advance(lease - 5*time.Second)
			if err := e.store.Extend(e.ctx, e.key, c.Token, lease); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			got := e.claim(fp, idempotency.InProgress)
			if want := e.clock.Now().Add(lease); !got.LeaseUntil.Equal(want) {
				t.Fatalf("after Extend LeaseUntil = %v, want %v", got.LeaseUntil, want)
			}
		}
		e.complete(c.Token, Response())
		e.claim(fp, idempotency.Completed)
	})

	t.Run("TakeoverAfterLeaseEnds", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		old := e.claim(fp, idempotency.Claimed)
		e.clock.Advance(lease + time.Second)
		cur := e.claim(fp, idempotency.Claimed)
		if cur.Token == old.Token {
			t.Fatalf("takeover reused the old token")
		}
		// The stale owner can touch nothing.
		e.notOwner("Extend", e.store.Extend(e.ctx, e.key, old.Token, lease))
		e.notOwner("Complete", e.store.Complete(e.ctx, e.key, old.Token, idempotency.Completion{Response: idempotency.Response{Status: 200, Body: []byte("stale")}}))
		e.notOwner("Release", e.store.Release(e.ctx, e.key, old.Token))
		e.claim(fp, idempotency.InProgress)
		want := Response()
		e.complete(cur.Token, want)
		e.notOwner("Complete after the new owner completed", e.store.Complete(e.ctx, e.key, old.Token, idempotency.Completion{}))
		e.notOwner("Release after the new owner completed", e.store.Release(e.ctx, e.key, old.Token))
		sameResponse(t, e.claim(fp, idempotency.Completed).Response, want)
	})

	t.Run("ReleaseLetsNextClaimRun", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, idempotency.Claimed)
		if err := e.store.Release(e.ctx, e.key, c.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
		// No waiting for the lease, and a corrected request may use the key.
		next := e.claim(fpB, idempotency.Claimed)
		e.notOwner("Release twice", e.store.Release(e.ctx, e.key, c.Token))
		e.notOwner("Complete after Release", e.store.Complete(e.ctx, e.key, c.Token, idempotency.Completion{}))
		e.complete(next.Token, Response())
		e.claim(fpB, idempotency.Completed)
	})

	t.Run("UnknownToken", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		e.notOwner("Extend of an absent key", e.store.Extend(e.ctx, e.key, "nope", lease))
		e.notOwner("Complete of an absent key", e.store.Complete(e.ctx, e.key, "nope", idempotency.Completion{}))
		e.notOwner("Release of an absent key", e.store.Release(e.ctx, e.key, "nope"))
		e.claim(fp, idempotency.Claimed)
		e.notOwner("Complete with a wrong token", e.store.Complete(e.ctx, e.key, "nope", idempotency.Completion{}))
		e.notOwner("Release with a wrong token", e.store.Release(e.ctx, e.key, "nope"))
		e.claim(fp, idempotency.InProgress)
	})

	t.Run("ExpiryAllowsNewClaim", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, idempotency.Claimed)
		e.complete(c.Token, Response())
		e.clock.Advance(farFuture)
		// Expired, even if the item is still there (TTL deletion lags): a
		// new request may use the key.
		e.claim(fpB, idempotency.Claimed)
	})

	t.Run("FingerprintMismatch", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		c := e.claim(fp, idempotency.Claimed)
		got := e.claim(fpB, idempotency.KeyReused)
		if got.Fingerprint != fp {
			t.Errorf("KeyReused Fingerprint = %q, want the stored %q", got.Fingerprint, fp)
		}
		e.complete(c.Token, Response())
		e.claim(fpB, idempotency.KeyReused)
		e.claim(fp, idempotency.Completed)
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		e.claim(fp, idempotency.Claimed)
		other := *e
		other.key = idempotency.RecordKey("other-scope", e.key)
		other.claim(fpB, idempotency.Claimed)
	})
}
