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
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/leasetest"
	"github.com/sqsonce/sqsonce/step"
)

// NewStore returns a fresh store whose clock is now. Each subtest calls it
// once; the store may share a table with others (keys are unique per
// subtest).
type NewStore func(t *testing.T, now func() time.Time) idempotency.Store

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

// emptyResult names the response with neither headers nor body.
const emptyResult = "empty"

// notRetainedResult names a response that was not retained: a status, a
// header, no body, and the mark.
const notRetainedResult = "not-retained"

// responseFor is the response stored for the result named result:
// [Response] with the name appended to its body, or, for emptyResult, a
// bare 204, or, for notRetainedResult, a 201 with a Location marked not
// retained.
func responseFor(result string) idempotency.Response {
	switch result {
	case emptyResult:
		return idempotency.Response{Status: http.StatusNoContent}
	case notRetainedResult:
		return idempotency.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/exports/e-1"}}, NotRetained: true}
	}
	r := Response()
	r.Body = append(r.Body, result...)
	return r
}

// Run runs the conformance suite against stores made by newStore: the
// lease record's cases shared with the dedupe stores, each completing with
// a response the later claims must replay, then the idempotency store's
// own.
func Run(t *testing.T, newStore NewStore) {
	cfg := leasetest.Config{
		NewStore: func(t *testing.T, now func() time.Time) leasetest.Store {
			s := &store{s: newStore(t, now)}
			if ss, ok := s.s.(idempotency.StepStore); ok {
				return &stepStore{store: s, ss: ss}
			}
			return s
		},
		Key:         func() string { return idempotency.RecordKey("scope", leasetest.Key("conformance")) },
		ErrNotOwner: idempotency.ErrNotOwner,
		Results:     true,
	}
	leasetest.Run(t, cfg)

	t.Run("EmptyResponse", func(t *testing.T) {
		t.Parallel()
		e := leasetest.Setup(t, cfg)
		c := e.Claim(leasetest.FP, leasetest.Claimed)
		e.Complete(c.Token, emptyResult)
		e.Completed(leasetest.FP, emptyResult)
	})

	// A response the middleware could not keep: the record holds its
	// status, its headers and the mark, which a claim gives back. (An
	// empty body, above, is not that mark.)
	t.Run("NotRetained", func(t *testing.T) {
		t.Parallel()
		e := leasetest.Setup(t, cfg)
		c := e.Claim(leasetest.FP, leasetest.Claimed)
		e.Complete(c.Token, notRetainedResult)
		e.Completed(leasetest.FP, notRetainedResult)
	})

	// A store that reads a record without changing it (an
	// idempotency.Lookuper, as every store of this module is) shows each
	// state as stored, and a lookup claims nothing.
	t.Run("Lookup", func(t *testing.T) {
		t.Parallel()
		e := leasetest.Setup(t, cfg)
		l, ok := underlying(e.Store).(idempotency.Lookuper)
		if !ok {
			t.Log("the store is not an idempotency.Lookuper")
			return
		}
		if _, err := l.Lookup(e.Ctx, e.Key); !errors.Is(err, idempotency.ErrNoRecord) {
			t.Fatalf("Lookup of an unclaimed key: %v, want ErrNoRecord", err)
		}
		c := e.Claim(leasetest.FP, leasetest.Claimed)
		r, err := l.Lookup(e.Ctx, e.Key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != idempotency.StatusInProgress || r.Fingerprint != leasetest.FP || !r.LeaseUntil.Equal(c.LeaseUntil) || r.Response != nil || !r.ExpiresAt.After(e.Clock.Now()) {
			t.Fatalf("in progress: %+v (lease until %s)", r, c.LeaseUntil)
		}
		e.Complete(c.Token, "looked-up")
		r, err = l.Lookup(e.Ctx, e.Key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != idempotency.StatusCompleted || r.Fingerprint != leasetest.FP || r.Response == nil || !sameResponse(*r.Response, responseFor("looked-up")) {
			t.Fatalf("completed: %+v", r)
		}
		e.Completed(leasetest.FP, "looked-up")
		e.Clock.Advance(1000 * 24 * time.Hour)
		if _, err := l.Lookup(e.Ctx, e.Key); !errors.Is(err, idempotency.ErrNoRecord) {
			t.Fatalf("Lookup of an expired record: %v, want ErrNoRecord", err)
		}
	})
}

// store shows an idempotency.Store to the shared cases. A result name
// stands for the response [responseFor] makes of it; a completed claim
// reports the name whose response it replays, byte for byte.
type store struct {
	s idempotency.Store

	mu      sync.Mutex
	results []string // every name given to Complete
}

func (s *store) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (leasetest.Claim, error) {
	c, err := s.s.Claim(ctx, key, fingerprint, lease)
	if err != nil {
		return leasetest.Claim{}, err
	}
	got := leasetest.Claim{Status: leasetest.Status(c.Status.String()), Token: c.Token, LeaseUntil: c.LeaseUntil, Fingerprint: c.Fingerprint, Steps: c.Steps}
	switch {
	case c.Status != idempotency.Completed && c.Response != nil:
		return got, fmt.Errorf("idemtest: status %s came with a response", c.Status)
	case c.Status == idempotency.Completed && c.Response == nil:
		return got, fmt.Errorf("idemtest: completed claim without a response")
	case c.Status == idempotency.Completed:
		got.Result = s.result(*c.Response)
	}
	return got, nil
}

// result names the response r, or describes it when no Complete stored it.
func (s *store) result(r idempotency.Response) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.results {
		if sameResponse(r, responseFor(name)) {
			return name
		}
	}
	return fmt.Sprintf("no stored response: %d %v %q not retained: %v", r.Status, r.Header, r.Body, r.NotRetained)
}

func sameResponse(a, b idempotency.Response) bool {
	if a.Status != b.Status || !bytes.Equal(a.Body, b.Body) || a.NotRetained != b.NotRetained {
		return false
	}
	return len(a.Header) == 0 && len(b.Header) == 0 || reflect.DeepEqual(a.Header, b.Header)
}

func (s *store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	return s.s.Extend(ctx, key, token, lease)
}

func (s *store) Complete(ctx context.Context, key, token, result string) error {
	s.mu.Lock()
	s.results = append(s.results, result)
	s.mu.Unlock()
	return s.s.Complete(ctx, key, token, idempotency.Completion{Response: responseFor(result)})
}

func (s *store) Release(ctx context.Context, key, token string) error {
	return s.s.Release(ctx, key, token)
}

// stepStore shows an idempotency.StepStore to the shared cases, step
// cases included.
type stepStore struct {
	*store
	ss idempotency.StepStore
}

func (s *stepStore) SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error {
	return s.ss.SaveSteps(ctx, key, token, steps)
}

func (s *stepStore) Unknown(ctx context.Context, limit int) ([]step.Unresolved, error) {
	return s.ss.Unknown(ctx, limit)
}

func (s *stepStore) Resolve(ctx context.Context, key, name string, applied bool) error {
	return s.ss.Resolve(ctx, key, name, applied)
}

// underlying is the store under test behind the adapter s.
func underlying(s leasetest.Store) idempotency.Store {
	if ss, ok := s.(*stepStore); ok {
		return ss.s
	}
	return s.(*store).s
}
