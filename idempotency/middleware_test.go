package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/idempotency"
)

// scope is the test's ScopeFunc: the bearer token names the caller.
func scope(r *http.Request) (string, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return "", errors.New("no bearer token")
	}
	return tok, nil
}

func newMiddleware(t testing.TB, cfg idempotency.Config) *idempotency.Middleware {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = idempotency.NewMemory(idempotency.MemoryConfig{NowFunc: cfg.NowFunc})
	}
	if cfg.ScopeFunc == nil {
		cfg.ScopeFunc = scope
	}
	m, err := idempotency.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// credits is a handler that counts its runs and answers 201 with a new id.
type credits struct {
	runs atomic.Int64
}

func (c *credits) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/credits/c-%d", n))
	w.Header().Set("Set-Cookie", "session=secret")
	w.Header().Set("X-Request-Cost", "7")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"credit_id":"c-%d","request":%q}`, n, body)
}

// post sends a request through h and returns the recorded response.
func post(h http.Handler, method, target, key, token, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if key != "" {
		r.Header.Set(idempotency.HeaderKey, key)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// problemType checks a problem+json answer and returns its type.
func problemType(t *testing.T, w *httptest.ResponseRecorder, status int) string {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d (body %s)", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != idempotency.ProblemContentType {
		t.Fatalf("Content-Type %q, want %q", ct, idempotency.ProblemContentType)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Title  string `json:"title"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	if p.Status != status || p.Title == "" || p.Type == "" {
		t.Fatalf("problem %+v", p)
	}
	return p.Type
}

func TestPassThrough(t *testing.T) {
	t.Parallel()
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{}).Wrap(c)
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete} {
		if w := post(h, m, "/credits", "", "", ""); w.Code != http.StatusCreated {
			t.Errorf("%s without a key: %d, want the handler's 201", m, w.Code)
		}
	}
	// The same key on a PUT twice runs twice: PUT is not a keyed method.
	post(h, http.MethodPut, "/credits", "k", "alice", "")
	post(h, http.MethodPut, "/credits", "k", "alice", "")
	if got := c.runs.Load(); got != 6 {
		t.Fatalf("runs = %d, want 6", got)
	}
	// Configurable: PUT takes keys when listed.
	h = newMiddleware(t, idempotency.Config{Methods: []string{http.MethodPut}}).Wrap(c)
	post(h, http.MethodPut, "/credits", "k", "alice", "")
	if w := post(h, http.MethodPut, "/credits", "k", "alice", ""); w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("PUT with Methods=[PUT]: %d, want a replay", w.Code)
	}
	if w := post(h, http.MethodPost, "/credits", "", "", ""); w.Code != http.StatusCreated {
		t.Fatalf("POST with Methods=[PUT]: %d, want to pass through", w.Code)
	}
}

func TestKeyMissing(t *testing.T) {
	t.Parallel()
	c := &credits{}
	m := newMiddleware(t, idempotency.Config{})
	for _, meth := range []string{http.MethodPost, http.MethodPatch} {
		w := post(m.Wrap(c), meth, "/credits", "", "alice", "{}")
		if typ := problemType(t, w, http.StatusBadRequest); typ != idempotency.TypeKeyMissing {
			t.Errorf("%s: type %s", meth, typ)
		}
	}
	if c.runs.Load() != 0 || m.Count(idempotency.OutcomeRejected) != 2 {
		t.Fatalf("runs %d, rejected %d", c.runs.Load(), m.Count(idempotency.OutcomeRejected))
	}
	// KeyOptional: no key passes through.
	opt := newMiddleware(t, idempotency.Config{KeyOptional: true}).Wrap(c)
	if w := post(opt, http.MethodPost, "/credits", "", "alice", "{}"); w.Code != http.StatusCreated {
		t.Fatalf("KeyOptional without a key: %d", w.Code)
	}
}

func TestKeyInvalid(t *testing.T) {
	t.Parallel()
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{}).Wrap(c)
	for _, key := range []string{`""`, strings.Repeat("k", 256), "a b", "clé", `"unterminated`, `"a"b"`} {
		w := post(h, http.MethodPost, "/credits", key, "alice", "{}")
		if typ := problemType(t, w, http.StatusBadRequest); typ != idempotency.TypeKeyInvalid {
			t.Errorf("key %q: type %s", key, typ)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/credits", nil)
	r.Header.Add(idempotency.HeaderKey, "a")
	r.Header.Add(idempotency.HeaderKey, "b")
	r.Header.Set("Authorization", "Bearer alice")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if typ := problemType(t, w, http.StatusBadRequest); typ != idempotency.TypeKeyInvalid {
		t.Errorf("two keys: type %s", typ)
	}
	if c.runs.Load() != 0 {
		t.Fatalf("runs = %d, want 0", c.runs.Load())
	}
}

func TestScope(t *testing.T) {
	t.Parallel()
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{}).Wrap(c)
	if typ := problemType(t, post(h, http.MethodPost, "/credits", "k1", "", "{}"), http.StatusUnauthorized); typ != idempotency.TypeScope {
		t.Errorf("no scope: type %s", typ)
	}
	// One key, two callers: two executions, and neither sees the other's
	// response.
	a := post(h, http.MethodPost, "/credits", "k1", "alice", "{}")
	b := post(h, http.MethodPost, "/credits", "k1", "bob", "{}")
	if a.Code != 201 || b.Code != 201 || b.Header().Get(idempotency.HeaderReplayed) != "" || a.Body.String() == b.Body.String() {
		t.Fatalf("alice %d %s, bob %d %s: want two executions", a.Code, a.Body, b.Code, b.Body)
	}
	if c.runs.Load() != 2 {
		t.Fatalf("runs = %d, want 2", c.runs.Load())
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	c := &credits{}
	m := newMiddleware(t, idempotency.Config{})
	h := m.Wrap(c)
	first := post(h, http.MethodPost, "/credits?b=2&a=1", "key-1", "alice", `{"amount":5}`)
	if first.Code != http.StatusCreated || first.Header().Get("Set-Cookie") == "" || first.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("first: %d %v", first.Code, first.Header())
	}
	// The quoted form is the same key; query order does not matter.
	for _, key := range []string{"key-1", `"key-1"`} {
		again := post(h, http.MethodPost, "/credits?a=1&b=2", key, "alice", `{"amount":5}`)
		if again.Code != http.StatusCreated || !bytes.Equal(again.Body.Bytes(), first.Body.Bytes()) {
			t.Fatalf("replay of %s: %d %q, want %d %q", key, again.Code, again.Body, first.Code, first.Body)
		}
		hd := again.Header()
		if hd.Get(idempotency.HeaderReplayed) != "true" || hd.Get("Location") != "/credits/c-1" || hd.Get("Content-Type") != "application/json" {
			t.Fatalf("replayed headers %v", hd)
		}
		if hd.Get("Set-Cookie") != "" || hd.Get("X-Request-Cost") != "" {
			t.Fatalf("replay carries headers that are not allow-listed: %v", hd)
		}
	}
	if c.runs.Load() != 1 || m.Count(idempotency.OutcomeExecuted) != 1 || m.Count(idempotency.OutcomeReplayed) != 2 {
		t.Fatalf("runs %d, executed %d, replayed %d", c.runs.Load(), m.Count(idempotency.OutcomeExecuted), m.Count(idempotency.OutcomeReplayed))
	}
	// An allow-listed extra header is stored.
	h = newMiddleware(t, idempotency.Config{ReplayHeaders: []string{"x-request-cost"}}).Wrap(c)
	post(h, http.MethodPost, "/credits", "key-2", "alice", "")
	if got := post(h, http.MethodPost, "/credits", "key-2", "alice", "").Header(); got.Get("X-Request-Cost") != "7" || got.Get("Location") != "" {
		t.Fatalf("ReplayHeaders=[X-Request-Cost]: replayed %v", got)
	}
}

func TestKeyReused(t *testing.T) {
	t.Parallel()
	c := &credits{}
	m := newMiddleware(t, idempotency.Config{FingerprintHeaders: []string{"X-Tenant"}})
	h := m.Wrap(c)
	post(h, http.MethodPost, "/credits?a=1", "k", "alice", `{"amount":5}`)
	for name, req := range map[string]*http.Request{
		"body":   httptest.NewRequest(http.MethodPost, "/credits?a=1", strings.NewReader(`{"amount":6}`)),
		"path":   httptest.NewRequest(http.MethodPost, "/debits?a=1", strings.NewReader(`{"amount":5}`)),
		"query":  httptest.NewRequest(http.MethodPost, "/credits?a=2", strings.NewReader(`{"amount":5}`)),
		"method": httptest.NewRequest(http.MethodPatch, "/credits?a=1", strings.NewReader(`{"amount":5}`)),
		"header": httptest.NewRequest(http.MethodPost, "/credits?a=1", strings.NewReader(`{"amount":5}`)),
	} {
		req.Header.Set(idempotency.HeaderKey, "k")
		req.Header.Set("Authorization", "Bearer alice")
		if name == "header" {
			req.Header.Set("X-Tenant", "t2")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if typ := problemType(t, w, http.StatusUnprocessableEntity); typ != idempotency.TypeKeyReused {
			t.Errorf("different %s: type %s", name, typ)
		}
	}
	if c.runs.Load() != 1 || m.Count(idempotency.OutcomeKeyReused) != 5 {
		t.Fatalf("runs %d, key_reused %d", c.runs.Load(), m.Count(idempotency.OutcomeKeyReused))
	}
}

// blocking is a handler that signals it started and waits to be let go.
type blocking struct {
	runs    atomic.Int64
	started chan struct{}
	finish  chan struct{}
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 100), finish: make(chan struct{})}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := b.runs.Add(1)
	b.started <- struct{}{}
	<-b.finish
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "run %d", n)
}

// TestInProgress: a retry while the first runs gets 409 with the lease's
// remaining seconds; a different request with the key gets 422 meanwhile.
func TestInProgress(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBlocking()
		m := newMiddleware(t, idempotency.Config{Lease: 30 * time.Second})
		h := m.Wrap(b)
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- post(h, http.MethodPost, "/credits", "k", "alice", "x") }()
		<-b.started
		time.Sleep(4500 * time.Millisecond)
		w := post(h, http.MethodPost, "/credits", "k", "alice", "x")
		if typ := problemType(t, w, http.StatusConflict); typ != idempotency.TypeInProgress {
			t.Fatalf("type %s", typ)
		}
		// 30 s lease, claimed 4.5 s ago and not yet extended (every 10 s).
		if ra := w.Header().Get("Retry-After"); ra != "26" {
			t.Fatalf("Retry-After %q, want 26", ra)
		}
		if typ := problemType(t, post(h, http.MethodPost, "/credits", "k", "alice", "other body"), http.StatusUnprocessableEntity); typ != idempotency.TypeKeyReused {
			t.Fatalf("different body while running: type %s", typ)
		}
		close(b.finish)
		if first := <-done; first.Code != http.StatusCreated {
			t.Fatalf("first: %d", first.Code)
		}
		if b.runs.Load() != 1 || m.Count(idempotency.OutcomeInProgress) != 1 {
			t.Fatalf("runs %d, in_progress %d", b.runs.Load(), m.Count(idempotency.OutcomeInProgress))
		}
	})
}

func TestRetryAfterAtLeastOneSecond(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := idempotency.NewMemory(idempotency.MemoryConfig{})
		b := newBlocking()
		// A 300 ms lease whose extensions all fail: the retry 200 ms in
		// still finds it running, with less than a second left.
		h := newMiddleware(t, idempotency.Config{Store: &flaky{Store: store, failExtend: true}, Lease: 300 * time.Millisecond}).Wrap(b)
		done := make(chan struct{})
		go func() { post(h, http.MethodPost, "/credits", "k", "alice", "x"); close(done) }()
		<-b.started
		time.Sleep(200 * time.Millisecond)
		w := post(h, http.MethodPost, "/credits", "k", "alice", "x")
		problemType(t, w, http.StatusConflict)
		if ra := w.Header().Get("Retry-After"); ra != "1" {
			t.Fatalf("Retry-After %q, want 1", ra)
		}
		close(b.finish)
		<-done
	})
}

// TestConcurrentRetriesRunOnce: 20 clients send one key at once over real
// connections; the handler runs once, the others get 409, and every later
// retry replays.
func TestConcurrentRetriesRunOnce(t *testing.T) {
	t.Parallel()
	b := newBlocking()
	m := newMiddleware(t, idempotency.Config{})
	srv := httptest.NewServer(m.Wrap(b))
	defer srv.Close()
	send := func() (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/credits", strings.NewReader("x"))
		req.Header.Set(idempotency.HeaderKey, "same")
		req.Header.Set("Authorization", "Bearer alice")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Errorf("post: %v", err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header.Get("Retry-After")
	}
	const n = 20
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Go(func() {
			code, _, ra := send()
			if code == http.StatusConflict && ra == "" {
				t.Errorf("409 without Retry-After")
			}
			codes <- code
		})
	}
	<-b.started
	// Every other request answers 409 while the first is held.
	count := map[int]int{}
	for range n - 1 {
		count[<-codes]++
	}
	close(b.finish)
	wg.Wait()
	count[<-codes]++
	if count[http.StatusCreated] != 1 || count[http.StatusConflict] != n-1 || b.runs.Load() != 1 {
		t.Fatalf("statuses %v, runs %d: want one 201, %d 409s, one run", count, b.runs.Load(), n-1)
	}
	for range 3 {
		if code, body, _ := send(); code != http.StatusCreated || body != "run 1" {
			t.Fatalf("later retry: %d %q, want the replay of run 1", code, body)
		}
	}
}

// flaky wraps a store: failExtend makes every Extend fail as if the store
// were unreachable (a partition, or a process that died).
type flaky struct {
	idempotency.Store
	failExtend bool
}

func (f *flaky) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	if f.failExtend {
		return errors.New("store unreachable")
	}
	return f.Store.Extend(ctx, key, token, lease)
}

// TestLeaseExtendedWhileRunning: a handler that runs ten leases long keeps
// its key: retries meanwhile get 409, never a second run.
func TestLeaseExtendedWhileRunning(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		h := newMiddleware(t, idempotency.Config{Lease: 3 * time.Second}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			select {
			case <-time.After(30 * time.Second):
			case <-r.Context().Done():
				t.Errorf("handler cancelled: %v", context.Cause(r.Context()))
			}
			w.WriteHeader(http.StatusCreated)
		}))
		done := make(chan int)
		go func() { done <- post(h, http.MethodPost, "/credits", "k", "alice", "x").Code }()
		for range 5 {
			time.Sleep(5 * time.Second)
			if w := post(h, http.MethodPost, "/credits", "k", "alice", "x"); w.Code != http.StatusConflict {
				t.Fatalf("retry while running: %d, want 409", w.Code)
			}
		}
		if code := <-done; code != http.StatusCreated || runs.Load() != 1 {
			t.Fatalf("first %d, runs %d", code, runs.Load())
		}
	})
}

// TestCrashThenTakeover: the first owner's process dies mid-request (its
// store calls stop arriving). Retries get 409 until its lease ends; then
// the key runs again, once.
func TestCrashThenTakeover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := idempotency.NewMemory(idempotency.MemoryConfig{})
		dead := newBlocking()
		crashed := newMiddleware(t, idempotency.Config{Store: &flaky{Store: store, failExtend: true}, Lease: 10 * time.Second}).Wrap(dead)
		go post(crashed, http.MethodPost, "/credits", "k", "alice", "x")
		<-dead.started

		c := &credits{}
		m := newMiddleware(t, idempotency.Config{Store: store, Lease: 10 * time.Second})
		h := m.Wrap(c)
		time.Sleep(6 * time.Second)
		w := post(h, http.MethodPost, "/credits", "k", "alice", "x")
		if w.Code != http.StatusConflict || w.Header().Get("Retry-After") != "4" {
			t.Fatalf("during the dead owner's lease: %d Retry-After %q, want 409 and 4", w.Code, w.Header().Get("Retry-After"))
		}
		time.Sleep(4*time.Second + time.Millisecond)
		if w := post(h, http.MethodPost, "/credits", "k", "alice", "x"); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
			t.Fatalf("after the lease: %d, want a fresh 201", w.Code)
		}
		if w := post(h, http.MethodPost, "/credits", "k", "alice", "x"); w.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("then: %d, want a replay", w.Code)
		}
		if c.runs.Load() != 1 {
			t.Fatalf("runs after takeover = %d, want 1", c.runs.Load())
		}
		close(dead.finish) // let the dead owner's goroutine end
		synctest.Wait()
	})
}

// TestStaleOwnerFenced: an owner cut off from the store loses its lease
// (its context is cancelled with ErrLeaseLost); a retry takes over and
// completes; the stale owner, finishing later, cannot overwrite the stored
// response or release the new owner's record.
func TestStaleOwnerFenced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := idempotency.NewMemory(idempotency.MemoryConfig{})
		var cause error
		stale := newMiddleware(t, idempotency.Config{Store: &flaky{Store: store, failExtend: true}, Lease: 10 * time.Second})
		proceed := make(chan struct{})
		staleDone := make(chan *httptest.ResponseRecorder)
		go func() {
			staleDone <- post(stale.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
				cause = context.Cause(r.Context())
				<-proceed // a handler that ignores its context and finishes anyway
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "stale")
			})), http.MethodPost, "/credits", "k", "alice", "x")
		}()
		time.Sleep(11 * time.Second)
		fresh := newMiddleware(t, idempotency.Config{Store: store, Lease: 10 * time.Second})
		h := fresh.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "fresh")
		}))
		if w := post(h, http.MethodPost, "/credits", "k", "alice", "x"); w.Body.String() != "fresh" {
			t.Fatalf("takeover: %d %q", w.Code, w.Body)
		}
		close(proceed)
		<-staleDone
		if !errors.Is(cause, idempotency.ErrLeaseLost) {
			t.Fatalf("stale handler's context cause: %v, want ErrLeaseLost", cause)
		}
		if got := stale.Count(idempotency.OutcomeLeaseLost); got != 1 {
			t.Fatalf("stale owner lease_lost count = %d, want 1", got)
		}
		if w := post(h, http.MethodPost, "/credits", "k", "alice", "x"); w.Body.String() != "fresh" || w.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("after the stale owner finished: %d %q, want the fresh replay", w.Code, w.Body)
		}
	})
}

func TestServerErrors(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	fail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		http.Error(w, "boom "+strconv.FormatInt(runs.Load(), 10), http.StatusBadGateway)
	})
	// Stored and replayed by default.
	h := newMiddleware(t, idempotency.Config{}).Wrap(fail)
	post(h, http.MethodPost, "/x", "k", "alice", "")
	if w := post(h, http.MethodPost, "/x", "k", "alice", ""); w.Code != http.StatusBadGateway || w.Body.String() != "boom 1\n" || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("5xx replay: %d %q", w.Code, w.Body)
	}
	// Released with ReleaseServerErrors.
	h = newMiddleware(t, idempotency.Config{ReleaseServerErrors: true}).Wrap(fail)
	post(h, http.MethodPost, "/x", "k", "alice", "")
	if w := post(h, http.MethodPost, "/x", "k", "alice", ""); w.Body.String() != "boom 3\n" || w.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("ReleaseServerErrors: %d %q, want a fresh run", w.Code, w.Body)
	}
}

// TestRelease: a handler that rejects a body releases the key, so the
// corrected request with the same key runs.
func TestRelease(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	m := newMiddleware(t, idempotency.Config{})
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		body, _ := io.ReadAll(r.Body)
		if string(body) != "valid" {
			if !idempotency.Release(r.Context()) {
				t.Error("Release: no key held")
			}
			http.Error(w, "invalid", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if w := post(h, http.MethodPost, "/x", "k", "alice", "bad"); w.Code != http.StatusBadRequest {
		t.Fatalf("invalid: %d", w.Code)
	}
	if w := post(h, http.MethodPost, "/x", "k", "alice", "valid"); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("corrected retry: %d, want a fresh 201", w.Code)
	}
	if w := post(h, http.MethodPost, "/x", "k", "alice", "valid"); w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("then: want a replay")
	}
	if runs.Load() != 2 || m.Count(idempotency.OutcomeReleased) != 1 {
		t.Fatalf("runs %d, released %d", runs.Load(), m.Count(idempotency.OutcomeReleased))
	}
	if idempotency.Release(context.Background()) {
		t.Fatal("Release outside a keyed request reported a key")
	}
}

func TestPanicReleases(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	h := newMiddleware(t, idempotency.Config{}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			panic("handler bug")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	func() {
		defer func() {
			if p := recover(); p != "handler bug" {
				t.Fatalf("recovered %v, want the handler's panic passed on", p)
			}
		}()
		post(h, http.MethodPost, "/x", "k", "alice", "")
	}()
	if w := post(h, http.MethodPost, "/x", "k", "alice", ""); w.Code != http.StatusCreated || runs.Load() != 2 {
		t.Fatalf("after a panic: %d, runs %d, want a fresh run", w.Code, runs.Load())
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{MaxBodyBytes: 10}).Wrap(c)
	if typ := problemType(t, post(h, http.MethodPost, "/x", "k", "alice", strings.Repeat("a", 11)), http.StatusRequestEntityTooLarge); typ != idempotency.TypeBodyTooLarge {
		t.Fatalf("type %s", typ)
	}
	// Without a Content-Length (chunked): caught while reading.
	r := httptest.NewRequest(http.MethodPost, "/x", io.MultiReader(strings.NewReader(strings.Repeat("a", 8)), strings.NewReader(strings.Repeat("a", 8))))
	r.ContentLength = -1
	r.Header.Set(idempotency.HeaderKey, "k")
	r.Header.Set("Authorization", "Bearer alice")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	problemType(t, w, http.StatusRequestEntityTooLarge)
	if w := post(h, http.MethodPost, "/x", "k", "alice", strings.Repeat("a", 10)); w.Code != http.StatusCreated {
		t.Fatalf("body at the cap: %d", w.Code)
	}
	if c.runs.Load() != 1 {
		t.Fatalf("runs %d, want 1", c.runs.Load())
	}
}

// TestResponseTooLargeNotRetained: a response over the cap reaches the
// client whole; the record is completed without it, so a retry gets its
// status and a problem saying it was not retained, and never runs again.
func TestResponseTooLargeNotRetained(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	var events []idempotency.Event
	big := bytes.Repeat([]byte("0123456789abcdef"), 512) // 8 KiB
	m := newMiddleware(t, idempotency.Config{MaxResponseBytes: 1024, ObserveFunc: func(e idempotency.Event) { events = append(events, e) }})
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Location", "/exports/1")
		w.Header().Set("ETag", `"v1"`)
		for i := 0; i < len(big); i += 100 {
			w.Write(big[i:min(i+100, len(big))])
		}
	}))
	w := post(h, http.MethodPost, "/x", "k", "alice", "")
	if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), big) || w.Header().Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("first: %d, %d bytes", w.Code, w.Body.Len())
	}
	w = post(h, http.MethodPost, "/x", "k", "alice", "")
	if runs.Load() != 1 {
		t.Fatalf("retry: %d, %d bytes after %d runs; the request ran again", w.Code, w.Body.Len(), runs.Load())
	}
	notRetained(t, w, http.StatusOK)
	// Location still holds; the ETag described the body that is gone.
	if w.Header().Get("Location") != "/exports/1" || w.Header().Get("ETag") != "" {
		t.Fatalf("replayed headers %v", w.Header())
	}
	if m.Count(idempotency.OutcomeNotStored) != 1 || m.Count(idempotency.OutcomeReplayed) != 1 {
		t.Fatalf("not_stored %d, replayed %d", m.Count(idempotency.OutcomeNotStored), m.Count(idempotency.OutcomeReplayed))
	}
	if len(events) != 2 || events[0].Outcome != idempotency.OutcomeNotStored || events[0].Status != http.StatusOK {
		t.Fatalf("events %+v", events)
	}
}

// TestTransactOnMemory: the memory store cannot commit work attached to
// the request (writes): the client gets a 500 problem, not the handler's
// success, and the key is released.
func TestTransactOnMemory(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	h := newMiddleware(t, idempotency.Config{}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if err := idempotency.Attach(r.Context(), "a write"); err != nil {
			t.Errorf("Attach: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	w := post(h, http.MethodPost, "/x", "k", "alice", "")
	if typ := problemType(t, w, http.StatusInternalServerError); typ != idempotency.TypeCommitRefused || w.Header().Get("Retry-After") != "" {
		t.Fatalf("type %s, Retry-After %q: want a 500 that does not invite a retry", typ, w.Header().Get("Retry-After"))
	}
	post(h, http.MethodPost, "/x", "k", "alice", "")
	if runs.Load() != 2 {
		t.Fatalf("runs %d, want the key released", runs.Load())
	}
	if err := idempotency.Attach(context.Background(), nil); !errors.Is(err, idempotency.ErrNoKey) {
		t.Fatalf("Attach outside a request: %v", err)
	}
	if err := idempotency.Attach(context.Background(), "a write"); !errors.Is(err, idempotency.ErrNoKey) {
		t.Fatalf("Attach of work outside a request: %v", err)
	}
	// Work of any type makes the request transactional (a build, here).
	h = newMiddleware(t, idempotency.Config{}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := idempotency.Attach(r.Context(), func() ([]string, error) { return nil, nil }); err != nil {
			t.Errorf("Attach: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	problemType(t, post(h, http.MethodPost, "/x", "k", "alice", ""), http.StatusInternalServerError)
}

// TestExpiry: a record expires after the TTL (24 h by default), judged on
// read: the key then runs again.
func TestExpiry(t *testing.T) {
	t.Parallel()
	clock := dedupetest.NewClock(time.Now())
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{NowFunc: clock.Now}).Wrap(c)
	post(h, http.MethodPost, "/x", "k", "alice", "")
	clock.Advance(23 * time.Hour)
	if w := post(h, http.MethodPost, "/x", "k", "alice", ""); w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("after 23 h: want a replay")
	}
	clock.Advance(2 * time.Hour)
	if w := post(h, http.MethodPost, "/x", "k", "alice", "a new body"); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("after 25 h: %d, want a fresh run", w.Code)
	}
	if c.runs.Load() != 2 {
		t.Fatalf("runs %d, want 2", c.runs.Load())
	}
}

type failingStore struct{ idempotency.Store }

func (failingStore) Claim(context.Context, string, string, time.Duration) (idempotency.Claim, error) {
	return idempotency.Claim{}, errors.New("store down")
}

func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	c := &credits{}
	h := newMiddleware(t, idempotency.Config{Store: failingStore{}}).Wrap(c)
	w := post(h, http.MethodPost, "/x", "k", "alice", "")
	if typ := problemType(t, w, http.StatusServiceUnavailable); typ != idempotency.TypeStoreUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("type %s, Retry-After %q", typ, w.Header().Get("Retry-After"))
	}
	if c.runs.Load() != 0 {
		t.Fatal("handler ran without a claim")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	for name, cfg := range map[string]idempotency.Config{
		"no store":   {ScopeFunc: scope},
		"no scope":   {Store: store},
		"set-cookie": {Store: store, ScopeFunc: scope, ReplayHeaders: []string{"set-cookie"}},
		"negative":   {Store: store, ScopeFunc: scope, Lease: -time.Second},
	} {
		if _, err := idempotency.New(cfg); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// TestTransactResponseTooLarge: a transactional response over the cap
// cannot be stored with its writes, so nothing is committed: the client
// gets a 500 problem, not a success that was never recorded.
func TestTransactResponseTooLarge(t *testing.T) {
	t.Parallel()
	var commits atomic.Int64
	store := &countingStore{Store: idempotency.NewMemory(idempotency.MemoryConfig{}), completes: &commits}
	m := newMiddleware(t, idempotency.Config{Store: store, MaxResponseBytes: 100})
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := idempotency.Attach(r.Context(), "a write"); err != nil {
			t.Errorf("Attach: %v", err)
		}
		w.Write(bytes.Repeat([]byte("x"), 1000))
	}))
	w := post(h, http.MethodPost, "/x", "k", "alice", "")
	if typ := problemType(t, w, http.StatusInternalServerError); typ != idempotency.TypeResponseTooLarge {
		t.Fatalf("type %s", typ)
	}
	if commits.Load() != 0 || m.Count(idempotency.OutcomeNotStored) != 1 {
		t.Fatalf("completes %d, not_stored %d", commits.Load(), m.Count(idempotency.OutcomeNotStored))
	}
	// Streamed first, Attach after: refused.
	h = m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 1000))
		if err := idempotency.Attach(r.Context(), "a write"); !errors.Is(err, idempotency.ErrResponseStarted) {
			t.Errorf("Attach after streaming: %v, want ErrResponseStarted", err)
		}
	}))
	if w := post(h, http.MethodPost, "/x", "k2", "alice", ""); w.Code != http.StatusOK || w.Body.Len() != 1000 {
		t.Fatalf("streamed: %d %d bytes", w.Code, w.Body.Len())
	}
}

type countingStore struct {
	idempotency.Store
	completes *atomic.Int64
}

func (s *countingStore) Complete(ctx context.Context, key, token string, c idempotency.Completion) error {
	s.completes.Add(1)
	return s.Store.Complete(ctx, key, token, c)
}

// TestScopeBeforeKey: an unauthenticated request is refused as such, with
// or without a key.
func TestScopeBeforeKey(t *testing.T) {
	t.Parallel()
	h := newMiddleware(t, idempotency.Config{}).Wrap(&credits{})
	if typ := problemType(t, post(h, http.MethodPost, "/x", "", "", ""), http.StatusUnauthorized); typ != idempotency.TypeScope {
		t.Fatalf("type %s", typ)
	}
}

// TestKeyAndScopeNeverLogged: the warnings of a failing store name the
// record by a prefix of its hash, never by the key or the caller.
func TestKeyAndScopeNeverLogged(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	for _, store := range []idempotency.Store{failingStore{}, &failingComplete{Store: idempotency.NewMemory(idempotency.MemoryConfig{})}} {
		h := newMiddleware(t, idempotency.Config{Store: store, Logger: zap.New(core)}).Wrap(&credits{})
		post(h, http.MethodPost, "/x", "secret-key-123", "secret-caller", "")
	}
	if logs.Len() < 2 {
		t.Fatalf("%d log entries, want the two store failures", logs.Len())
	}
	for _, e := range logs.All() {
		line := fmt.Sprint(e.Message, e.ContextMap())
		if strings.Contains(line, "secret-key-123") || strings.Contains(line, "secret-caller") {
			t.Fatalf("log entry holds the key or the scope: %s", line)
		}
		if _, ok := e.ContextMap()["idempotency_record"]; !ok {
			t.Fatalf("log entry without the record: %s", line)
		}
	}
}

type failingComplete struct{ idempotency.Store }

func (failingComplete) Complete(context.Context, string, string, idempotency.Completion) error {
	return errors.New("store down")
}

// TestLargeHeadersNotRetained: headers alone over the cap make the
// response too large to store, even with an empty body: the retry gets
// the status, without them.
func TestLargeHeadersNotRetained(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	m := newMiddleware(t, idempotency.Config{MaxResponseBytes: 100, ReplayHeaders: []string{"Location"}})
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Location", "/"+strings.Repeat("l", 200))
		w.WriteHeader(http.StatusCreated)
	}))
	if w := post(h, http.MethodPost, "/x", "k", "alice", ""); w.Code != http.StatusCreated || len(w.Header().Get("Location")) != 201 {
		t.Fatalf("first: %d %v", w.Code, w.Header())
	}
	w := post(h, http.MethodPost, "/x", "k", "alice", "")
	if runs.Load() != 1 {
		t.Fatalf("retry: %d after %d runs; the request ran again", w.Code, runs.Load())
	}
	notRetained(t, w, http.StatusCreated)
	if w.Header().Get("Location") != "" {
		t.Fatalf("replayed headers over the cap: %v", w.Header())
	}
	if m.Count(idempotency.OutcomeNotStored) != 1 {
		t.Fatalf("not_stored %d", m.Count(idempotency.OutcomeNotStored))
	}
}

// TestClientHangsUp: the client's connection drops while the handler runs;
// the handler is not cancelled, its response is stored, and the client's
// retry gets it.
func TestClientHangsUp(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	proceed := make(chan struct{})
	h := newMiddleware(t, idempotency.Config{}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		<-proceed
		if err := r.Context().Err(); err != nil {
			t.Errorf("handler context: %v", err)
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "done")
	}))
	ctx, hangUp := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("x")).WithContext(ctx)
	r.Header.Set(idempotency.HeaderKey, "k")
	r.Header.Set("Authorization", "Bearer alice")
	done := make(chan struct{})
	go func() { h.ServeHTTP(httptest.NewRecorder(), r); close(done) }()
	hangUp()
	close(proceed)
	<-done
	if w := post(h, http.MethodPost, "/x", "k", "alice", "x"); w.Code != http.StatusCreated || w.Body.String() != "done" || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("retry: %d %q, want the replay of the finished request", w.Code, w.Body)
	}
	if runs.Load() != 1 {
		t.Fatalf("runs %d", runs.Load())
	}
}

// tooLargeStore refuses every response with a body as too large.
type tooLargeStore struct{ idempotency.Store }

func (s tooLargeStore) Complete(ctx context.Context, key, token string, c idempotency.Completion) error {
	if len(c.Response.Body) > 0 {
		return fmt.Errorf("store: %w", idempotency.ErrTooLarge)
	}
	return s.Store.Complete(ctx, key, token, c)
}

// TestStoreTooLarge: a store's own size limit makes a response unstored
// like the middleware's cap: delivered and completed without its body, or
// with writes, not committed.
func TestStoreTooLarge(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	tx := false
	m := newMiddleware(t, idempotency.Config{Store: tooLargeStore{idempotency.NewMemory(idempotency.MemoryConfig{})}})
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if tx {
			idempotency.Attach(r.Context(), "a write")
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "big")
	}))
	if w := post(h, http.MethodPost, "/x", "k", "alice", ""); w.Code != http.StatusCreated || w.Body.String() != "big" {
		t.Fatalf("first: %d %q", w.Code, w.Body)
	}
	w := post(h, http.MethodPost, "/x", "k", "alice", "")
	if runs.Load() != 1 {
		t.Fatalf("retry: %d %q after %d runs; the request ran again", w.Code, w.Body, runs.Load())
	}
	notRetained(t, w, http.StatusCreated)
	tx = true
	if typ := problemType(t, post(h, http.MethodPost, "/x", "k2", "alice", ""), http.StatusInternalServerError); typ != idempotency.TypeResponseTooLarge {
		t.Fatalf("with writes: type %s", typ)
	}
	// Nothing was committed: the key was released and runs again.
	post(h, http.MethodPost, "/x", "k2", "alice", "")
	if runs.Load() != 3 || m.Count(idempotency.OutcomeNotStored) != 3 {
		t.Fatalf("runs %d, not_stored %d", runs.Load(), m.Count(idempotency.OutcomeNotStored))
	}
}
