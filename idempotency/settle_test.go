package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqsonce/sqsonce/idempotency"
)

// brownout wraps a store whose Extend fails while down is set (a short
// DynamoDB brownout); its other calls keep working.
type brownout struct {
	idempotency.Store
	down    atomic.Bool
	extends atomic.Int64
	closed  atomic.Bool // every later Extend answers ErrNotOwner
}

func (b *brownout) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	b.extends.Add(1)
	switch {
	case b.closed.Load():
		return idempotency.ErrNotOwner
	case b.down.Load():
		return errors.New("store unreachable")
	}
	return b.Store.Extend(ctx, key, token, lease)
}

// TestLeaseLostFailureNotStored: the middleware cancels a handler whose
// lease it could not extend; the 5xx that cancellation causes is the
// middleware's own doing, so it is not stored: the key is released and the
// client's retry runs the handler.
func TestLeaseLostFailureNotStored(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &brownout{Store: idempotency.NewMemory(idempotency.MemoryConfig{})}
		store.down.Store(true)
		var runs atomic.Int64
		m := newMiddleware(t, idempotency.Config{Store: store, Lease: 3 * time.Second})
		h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if runs.Add(1) == 1 {
				<-r.Context().Done()
				store.down.Store(false) // the brownout ends
				http.Error(w, "aborted: "+context.Cause(r.Context()).Error(), http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusCreated)
		}))
		first := post(h, http.MethodPost, "/credits", "k", "alice", "x")
		if first.Code != http.StatusServiceUnavailable || !strings.Contains(first.Body.String(), idempotency.ErrLeaseLost.Error()) {
			t.Fatalf("first: %d %q, want the handler's 503 after the lease was lost", first.Code, first.Body)
		}
		time.Sleep(time.Hour)
		retry := post(h, http.MethodPost, "/credits", "k", "alice", "x")
		if retry.Code != http.StatusCreated || retry.Header().Get(idempotency.HeaderReplayed) != "" || runs.Load() != 2 {
			t.Fatalf("retry 1h later: %d replayed=%q after %d runs; want a fresh 201 (the lease-lost 503 is not stored)",
				retry.Code, retry.Header().Get(idempotency.HeaderReplayed), runs.Load())
		}
		if m.Count(idempotency.OutcomeLeaseLost) != 1 {
			t.Fatalf("lease_lost %d, want 1", m.Count(idempotency.OutcomeLeaseLost))
		}
	})
}

// TestGoexitStopsLeaseKeeper: a handler that ends its goroutine with
// runtime.Goexit (t.FailNow in a test server, for one) is treated like a
// panic: the lease keeper stops and the key is released.
func TestGoexitStopsLeaseKeeper(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &brownout{Store: idempotency.NewMemory(idempotency.MemoryConfig{})}
		var runs atomic.Int64
		h := newMiddleware(t, idempotency.Config{Store: store, Lease: 3 * time.Second}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if runs.Add(1) == 1 {
				runtime.Goexit()
			}
			w.WriteHeader(http.StatusCreated)
		}))
		done := make(chan struct{})
		go func() {
			defer close(done)
			post(h, http.MethodPost, "/credits", "k", "alice", "x")
		}()
		<-done
		time.Sleep(16 * 3 * time.Second)
		w := post(h, http.MethodPost, "/credits", "k", "alice", "x")
		n := store.extends.Load()
		store.closed.Store(true) // ends a keeper that leaked
		if w.Code != http.StatusCreated || n != 0 {
			t.Fatalf("after 16 leases: %d, extends so far %d; want a fresh 201 and no extension", w.Code, n)
		}
	})
}

// slowAnswer wraps a store whose first Extend is applied at once but
// answers late (a slow network); every later Extend fails.
type slowAnswer struct {
	idempotency.Store
	delay time.Duration
	calls atomic.Int64
}

func (s *slowAnswer) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	if s.calls.Add(1) > 1 {
		return errors.New("store unreachable")
	}
	err := s.Store.Extend(ctx, key, token, lease)
	time.Sleep(s.delay)
	return err
}

// TestLeaseEndFromBeforeExtend: the middleware's own view of the lease
// end is measured from before the Extend call, as the store's is: when the
// store's lease ends and another request takes the key over, the first
// handler has already been cancelled.
func TestLeaseEndFromBeforeExtend(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		memory := idempotency.NewMemory(idempotency.MemoryConfig{})
		start := time.Now()
		firstCtx := make(chan context.Context, 1)
		first := newMiddleware(t, idempotency.Config{Store: &slowAnswer{Store: memory, delay: 9 * time.Second}, Lease: 30 * time.Second})
		done := make(chan struct{})
		go func() {
			defer close(done)
			post(first.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				firstCtx <- r.Context()
				<-r.Context().Done()
				http.Error(w, "aborted", http.StatusServiceUnavailable)
			})), http.MethodPost, "/credits", "k", "alice", "x")
		}()
		ctx := <-firstCtx
		// The extension at 10 s moved the store's lease to 40 s; it ends.
		time.Sleep(41 * time.Second)
		var live bool
		second := newMiddleware(t, idempotency.Config{Store: memory, Lease: 30 * time.Second}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			live = ctx.Err() == nil
			w.WriteHeader(http.StatusCreated)
		}))
		w := post(second, http.MethodPost, "/credits", "k", "alice", "x")
		at := time.Since(start)
		<-done
		if w.Code != http.StatusCreated || live {
			t.Fatalf("takeover at %v: %d, first handler's context still live: %v; want it cancelled when the store's lease ended",
				at, w.Code, live)
		}
	})
}

// TestFingerprintRawQuery: queries that differ only in pairs that do not
// decode are different requests.
func TestFingerprintRawQuery(t *testing.T) {
	t.Parallel()
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{}).Wrap(c)
	post(h, http.MethodPost, "/credits?a=1&b=%zz", "k", "alice", "x")
	for _, target := range []string{"/credits?a=1", "/credits?a=1&b=%yy", "/credits?a=1;b=2", "/credits?a=1&&"} {
		w := post(h, http.MethodPost, target, "k", "alice", "x")
		if w.Code != http.StatusUnprocessableEntity {
			t.Errorf("%s after /credits?a=1&b=%%zz: %d replayed=%q, want 422", target, w.Code, w.Header().Get(idempotency.HeaderReplayed))
		}
	}
	// Pairs in another order are the same query; one key's values keep
	// their order.
	post(h, http.MethodPost, "/credits?x=1&x=2&y=3", "k2", "alice", "x")
	if w := post(h, http.MethodPost, "/credits?y=3&x=1&x=2", "k2", "alice", "x"); w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("reordered keys: %d, want a replay", w.Code)
	}
	if w := post(h, http.MethodPost, "/credits?x=2&x=1&y=3", "k2", "alice", "x"); w.Code != http.StatusUnprocessableEntity {
		t.Errorf("one key's values reordered: %d, want 422", w.Code)
	}
	if c.runs.Load() != 2 {
		t.Fatalf("runs %d, want 2", c.runs.Load())
	}
}

// notRetained checks a replay of a response that was not retained: the
// original status, Idempotent-Replayed, and a problem saying so.
func notRetained(t *testing.T, w *httptest.ResponseRecorder, status int) {
	t.Helper()
	if w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("retry: %d %v, want a replay", w.Code, w.Header())
	}
	if typ := problemType(t, w, status); typ != idempotency.TypeNotRetained {
		t.Fatalf("replay type %s", typ)
	}
	var p struct{ Detail string }
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || !strings.Contains(p.Detail, "not retained") {
		t.Fatalf("replay detail %q (%v)", p.Detail, err)
	}
}

// onceFailing fails its first Complete, as a store that did not answer.
type onceFailing struct {
	idempotency.Store
	calls atomic.Int64
}

func (s *onceFailing) Complete(ctx context.Context, key, token string, c idempotency.Completion) error {
	if s.calls.Add(1) == 1 {
		return errors.New("store down")
	}
	return s.Store.Complete(ctx, key, token, c)
}

// TestCompleteFailureNotRerun: the response of a request that ran could
// not be stored (the completion failed); the record is completed without
// it, so the retry learns the status and never runs the request again.
func TestCompleteFailureNotRerun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &credits{}
		m := newMiddleware(t, idempotency.Config{Store: &onceFailing{Store: idempotency.NewMemory(idempotency.MemoryConfig{})}})
		h := m.Wrap(c)
		if w := post(h, http.MethodPost, "/credits", "k", "alice", "x"); w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), "c-1") {
			t.Fatalf("first: %d %q", w.Code, w.Body)
		}
		time.Sleep(time.Hour) // past any lease
		w := post(h, http.MethodPost, "/credits", "k", "alice", "x")
		if c.runs.Load() != 1 {
			t.Fatalf("retry: %d %q after %d runs; the request ran again", w.Code, w.Body, c.runs.Load())
		}
		notRetained(t, w, http.StatusCreated)
		if w.Header().Get("Location") != "/credits/c-1" || w.Header().Get("Set-Cookie") != "" {
			t.Fatalf("replayed headers %v", w.Header())
		}
	})
}

// TestTooManyRequestsNotStored: a 429 says the request was not run, so it
// is not stored: the retry runs.
func TestTooManyRequestsNotStored(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	h := newMiddleware(t, idempotency.Config{}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if w := post(h, http.MethodPost, "/x", "k", "alice", ""); w.Code != http.StatusTooManyRequests {
		t.Fatalf("first: %d", w.Code)
	}
	if w := post(h, http.MethodPost, "/x", "k", "alice", ""); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("retry after a 429: %d replayed=%q, want a fresh 201", w.Code, w.Header().Get(idempotency.HeaderReplayed))
	}
}

// TestDefaultReplayHeaders: Link and rate-limit headers are replayed by
// default; Retry-After, Set-Cookie and other headers are not.
func TestDefaultReplayHeaders(t *testing.T) {
	t.Parallel()
	h := newMiddleware(t, idempotency.Config{}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Link", "</credits/c-1>; rel=self")
		hd.Set("RateLimit", `"default";r=9;t=30`)
		hd.Set("RateLimit-Policy", `"default";q=10;w=60`)
		hd.Set("X-RateLimit-Remaining", "9")
		hd.Set("X-RateLimit-Used", "1")
		hd.Set("Retry-After", "30")
		hd.Set("Set-Cookie", "session=secret")
		hd.Set("X-Request-Cost", "7")
		w.WriteHeader(http.StatusCreated)
	}))
	post(h, http.MethodPost, "/x", "k", "alice", "")
	got := post(h, http.MethodPost, "/x", "k", "alice", "").Header()
	for _, name := range []string{"Link", "RateLimit", "RateLimit-Policy", "X-RateLimit-Remaining", "X-RateLimit-Used"} {
		if got.Get(name) == "" {
			t.Errorf("%s not replayed: %v", name, got)
		}
	}
	for _, name := range []string{"Retry-After", "Set-Cookie", "X-Request-Cost"} {
		if got.Get(name) != "" {
			t.Errorf("%s replayed: %v", name, got)
		}
	}
}

// TestReplayHeadersRefuseSetCookie: no configuration stores Set-Cookie,
// not even through a pattern.
func TestReplayHeadersRefuseSetCookie(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	for _, list := range [][]string{{"set-cookie"}, {"Set-*"}, {"*"}, {"S*"}, {"Location", ""}, {"X-*-Limit"}} {
		_, err := idempotency.New(idempotency.Config{Store: store, ScopeFunc: scope, ReplayHeaders: list})
		if err == nil || !strings.Contains(err.Error(), "ReplayHeaders") {
			t.Errorf("ReplayHeaders %q: %v, want an error naming ReplayHeaders", list, err)
		}
	}
	m, err := idempotency.New(idempotency.Config{Store: store, ScopeFunc: scope, ReplayHeaders: []string{"X-Request-*"}})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Wrap(&credits{})
	post(h, http.MethodPost, "/x", "k", "alice", "")
	if got := post(h, http.MethodPost, "/x", "k", "alice", "").Header(); got.Get("X-Request-Cost") != "7" || got.Get("Location") != "" {
		t.Fatalf("ReplayHeaders=[X-Request-*]: replayed %v", got)
	}
}

// TestKeeperExtendsOnSchedule: the lease keeper extends every Lease/3
// while the handler runs, also when an extension is slow (the next is due
// a period after the last was, as with a ticker), and makes none once the
// handler has returned.
func TestKeeperExtendsOnSchedule(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &slowExtend{Store: idempotency.NewMemory(idempotency.MemoryConfig{})}
		h := newMiddleware(t, idempotency.Config{Store: store, Lease: 3 * time.Second}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(10*time.Second + 500*time.Millisecond)
			w.WriteHeader(http.StatusCreated)
		}))
		if w := post(h, http.MethodPost, "/credits", "k", "alice", "x"); w.Code != http.StatusCreated {
			t.Fatalf("status %d", w.Code)
		}
		// Due at 1, 2, ..., 10 s; each takes 200 ms, inside its period.
		if got := store.extends.Load(); got != 10 {
			t.Fatalf("%d extensions in 10.5 s with a 3 s lease, want 10", got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := store.extends.Load(); got != 10 {
			t.Fatalf("%d extensions after the handler returned, want none more than 10", got)
		}
	})
}

// slowExtend is a store whose Extend takes 200 ms.
type slowExtend struct {
	idempotency.Store
	extends atomic.Int64
}

func (s *slowExtend) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	time.Sleep(200 * time.Millisecond)
	s.extends.Add(1)
	return s.Store.Extend(ctx, key, token, lease)
}
