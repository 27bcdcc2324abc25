package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sqsonce/sqsonce/idempotency"
)

// fakeTx records what the middleware does with a request's transaction.
// A memory store stands in for the database: Claim claims the key there
// for as long as the transaction lasts (Rollback releases it), and
// Complete is applied to it only on Commit.
type fakeTx struct {
	store       idempotency.Store
	mu          sync.Mutex
	log         []string
	key, tok    string
	resp        idempotency.Response
	commitErr   error
	rollbackErr error
}

func (f *fakeTx) Claim(ctx context.Context, key, fingerprint string) (idempotency.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "claim")
	c, err := f.store.Claim(ctx, key, fingerprint, time.Hour)
	switch {
	case err == nil && c.Status == idempotency.Claimed:
		f.key, f.tok = key, c.Token
	case err == nil && c.Status == idempotency.InProgress:
		c.LeaseUntil = time.Time{} // held by a transaction: its end is unknown
	}
	return c, err
}

func (f *fakeTx) Complete(_ context.Context, key, token string, resp idempotency.Response) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "complete")
	if key != f.key || token != f.tok {
		return idempotency.ErrNotOwner
	}
	f.resp = resp
	return nil
}

func (f *fakeTx) Commit(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "commit")
	if f.commitErr != nil {
		return f.commitErr
	}
	return f.store.Complete(ctx, f.key, f.tok, idempotency.Completion{Response: f.resp})
}

func (f *fakeTx) Rollback(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "rollback")
	if f.tok != "" {
		_ = f.store.Release(ctx, f.key, f.tok) // ErrNotOwner after a commit
	}
	return f.rollbackErr
}

// A connection killed during COMMIT fails the commit and then the
// rollback: one event, one warning (the commit's), not two.
func TestTxModeKilledConnectionLogsOnce(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	dead := errors.New("conn closed")
	m := newMiddleware(t, idempotency.Config{Store: store, Logger: zap.New(core),
		BeginTxFunc: func(context.Context) (idempotency.Tx, error) {
			return &fakeTx{store: store, commitErr: dead, rollbackErr: dead}, nil
		}})
	post(m.Wrap(&credits{}), http.MethodPost, "/credits", "k", "alice", "{}")
	var lines []string
	for _, e := range logs.All() {
		lines = append(lines, e.Message)
	}
	if len(lines) != 1 {
		t.Fatalf("warnings for one killed connection: %q, want one", lines)
	}
}

// The transactional mode's sequence, driver-neutral: begin and claim in
// the transaction before the handler, which finds the transaction in its
// context; the response stored in it, committed, then sent. A failed
// begin runs nothing and claims nothing; a failed commit sends no 201.
func TestTxModeSequence(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	var (
		tx       *fakeTx
		beginErr error
	)
	m := newMiddleware(t, idempotency.Config{
		Store: store,
		BeginTxFunc: func(context.Context) (idempotency.Tx, error) {
			if beginErr != nil {
				return nil, beginErr
			}
			tx = &fakeTx{store: store}
			return tx, nil
		},
	})
	h := &credits{}
	wrapped := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if idempotency.TxFromContext(r.Context()) != tx {
			t.Error("the handler's context does not hold its transaction")
		}
		h.ServeHTTP(w, r)
	}))

	beginErr = errors.New("pool exhausted")
	if w := post(wrapped, http.MethodPost, "/credits", "k-1", "alice", "{}"); w.Code != http.StatusServiceUnavailable ||
		!strings.Contains(w.Body.String(), idempotency.TypeStoreUnavailable) || h.runs.Load() != 0 {
		t.Fatalf("failed begin: %d %s after %d runs, want 503 and no run", w.Code, w.Body, h.runs.Load())
	}
	beginErr = nil
	if w := post(wrapped, http.MethodPost, "/credits", "k-1", "alice", "{}"); w.Code != http.StatusCreated {
		t.Fatalf("after a failed begin the key must be free: %d %s", w.Code, w.Body)
	}
	if got := strings.Join(tx.log, ","); got != "claim,complete,commit" {
		t.Fatalf("transaction calls %s, want claim,complete,commit", got)
	}
	if w := post(wrapped, http.MethodPost, "/credits", "k-1", "alice", "{}"); w.Header().Get(idempotency.HeaderReplayed) != "true" || h.runs.Load() != 1 {
		t.Fatalf("retry: %d %v after %d runs, want a replay", w.Code, w.Header(), h.runs.Load())
	}
	if got := strings.Join(tx.log, ","); got != "claim,rollback" {
		t.Fatalf("the replay's transaction calls %s, want claim,rollback", got)
	}

	// A failed commit: rolled back, the key released, a 503 instead of the
	// handler's 201.
	beginErr = nil
	var failing *fakeTx
	m2 := newMiddleware(t, idempotency.Config{Store: store, BeginTxFunc: func(context.Context) (idempotency.Tx, error) {
		failing = &fakeTx{store: store, commitErr: errors.New("connection reset")}
		return failing, nil
	}})
	if w := post(m2.Wrap(h), http.MethodPost, "/credits", "k-2", "alice", "{}"); w.Code != http.StatusServiceUnavailable ||
		!strings.Contains(w.Body.String(), idempotency.TypeCommitFailed) {
		t.Fatalf("failed commit: %d %s, want 503 commit-failed", w.Code, w.Body)
	}
	if got := strings.Join(failing.log, ","); got != "claim,complete,commit,rollback" {
		t.Fatalf("transaction calls %s, want claim,complete,commit,rollback", got)
	}
	if c, err := store.Claim(context.Background(), idempotency.RecordKey("alice", "k-2"), "fp", 0); err != nil || c.Status != idempotency.Claimed {
		t.Fatalf("after a failed commit: %+v %v, want the key released", c, err)
	}
}

// A retry while another transaction holds the key gets 409 at once; a
// handler that ends its goroutine (runtime.Goexit) commits nothing, and
// its rollback frees the key.
func TestTxModeHeldKeyAndGoexit(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	var (
		mu  sync.Mutex
		txs []*fakeTx
	)
	m := newMiddleware(t, idempotency.Config{Store: store, BeginTxFunc: func(context.Context) (idempotency.Tx, error) {
		mu.Lock()
		defer mu.Unlock()
		txs = append(txs, &fakeTx{store: store})
		return txs[len(txs)-1], nil
	}})
	b := newBlocking()
	held := m.Wrap(b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		post(held, http.MethodPost, "/credits", "k-1", "alice", "{}")
	}()
	<-b.started
	w := post(held, http.MethodPost, "/credits", "k-1", "alice", "{}")
	if w.Code != http.StatusConflict || w.Header().Get("Retry-After") != "1" || b.runs.Load() != 1 {
		t.Errorf("while another transaction holds the key: %d Retry-After %q after %d runs, want 409 and 1", w.Code, w.Header().Get("Retry-After"), b.runs.Load())
	}
	close(b.finish)
	<-done

	exits := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runtime.Goexit() }))
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		post(exits, http.MethodPost, "/credits", "k-2", "alice", "{}")
	}()
	<-exited
	mu.Lock()
	last := txs[len(txs)-1]
	mu.Unlock()
	if got := strings.Join(last.log, ","); got != "claim,rollback" {
		t.Fatalf("transaction calls after runtime.Goexit: %s, want claim,rollback", got)
	}
	if c, err := store.Claim(context.Background(), idempotency.RecordKey("alice", "k-2"), "fp", time.Minute); err != nil || c.Status != idempotency.Claimed {
		t.Fatalf("after runtime.Goexit: %+v %v, want the key free", c, err)
	}
}

// TestTxModeCommitOutcomeUnknown: a commit that timed out may have been
// applied: the client is told the outcome is unknown (and to retry with
// the same key), never that nothing was committed.
func TestTxModeCommitOutcomeUnknown(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	m := newMiddleware(t, idempotency.Config{Store: store, BeginTxFunc: func(context.Context) (idempotency.Tx, error) {
		return &fakeTx{store: store, commitErr: fmt.Errorf("commit: %w", context.DeadlineExceeded)}, nil
	}})
	w := post(m.Wrap(&credits{}), http.MethodPost, "/credits", "k", "alice", "{}")
	if typ := problemType(t, w, http.StatusServiceUnavailable); typ != idempotency.TypeOutcomeUnknown ||
		strings.Contains(w.Body.String(), "nothing was committed") || w.Header().Get("Retry-After") == "" {
		t.Fatalf("commit timed out: %d %s (Retry-After %q), want 503 outcome-unknown with Retry-After", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
}

// TestTxModeCommitRefused: a commit the store refuses for good (its error
// wraps ErrPermanent) is rolled back and answered 500 TypeCommitRefused
// without Retry-After: retrying the same request cannot help. The
// rollback frees the key.
func TestTxModeCommitRefused(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	var tx *fakeTx
	m := newMiddleware(t, idempotency.Config{Store: store, BeginTxFunc: func(context.Context) (idempotency.Tx, error) {
		tx = &fakeTx{store: store, commitErr: fmt.Errorf("commit: %w", idempotency.ErrPermanent)}
		return tx, nil
	}})
	w := post(m.Wrap(&credits{}), http.MethodPost, "/credits", "k", "alice", "{}")
	if typ := problemType(t, w, http.StatusInternalServerError); typ != idempotency.TypeCommitRefused || w.Header().Get("Retry-After") != "" {
		t.Fatalf("commit refused: %d %s (Retry-After %q), want 500 commit-refused without Retry-After", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	if got := strings.Join(tx.log, ","); got != "claim,complete,commit,rollback" {
		t.Fatalf("transaction calls %s, want claim,complete,commit,rollback", got)
	}
	if c, err := store.Claim(context.Background(), idempotency.RecordKey("alice", "k"), "fp", time.Minute); err != nil || c.Status != idempotency.Claimed {
		t.Fatalf("after a refused commit: %+v %v, want the key free", c, err)
	}
}

// TestTxModeTooManyRequestsNotStored: a 429 says the request did not run:
// its transaction rolls back, and the retry runs.
func TestTxModeTooManyRequestsNotStored(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	var tx *fakeTx
	m := newMiddleware(t, idempotency.Config{Store: store, BeginTxFunc: func(context.Context) (idempotency.Tx, error) {
		tx = &fakeTx{store: store}
		return tx, nil
	}})
	var runs atomic.Int64
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	if w := post(h, http.MethodPost, "/credits", "k", "alice", "{}"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	if got := strings.Join(tx.log, ","); got != "claim,rollback" {
		t.Fatalf("the 429's transaction calls %s, want claim,rollback", got)
	}
	if w := post(h, http.MethodPost, "/credits", "k", "alice", "{}"); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" || runs.Load() != 2 {
		t.Fatalf("retry after a 429: %d replayed=%q after %d runs, want a fresh 201", w.Code, w.Header().Get(idempotency.HeaderReplayed), runs.Load())
	}
}

// TestTxModeReplaysNotRetained: a record completed "not retained" is
// answered in the transactional mode as in the lease mode: its status and
// a TypeNotRetained problem, and the request does not run again.
func TestTxModeReplaysNotRetained(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(idempotency.MemoryConfig{})
	// The lease mode completes a record not retained when its response is
	// over MaxResponseBytes; the transactional mode replays it.
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
	})
	if w := post(newMiddleware(t, idempotency.Config{Store: store, MaxResponseBytes: 1024}).Wrap(big), http.MethodPost, "/exports", "k", "alice", "{}"); w.Code != http.StatusAccepted {
		t.Fatalf("first: %d", w.Code)
	}
	c := &credits{}
	m := newMiddleware(t, idempotency.Config{Store: store, BeginTxFunc: func(context.Context) (idempotency.Tx, error) {
		return &fakeTx{store: store}, nil
	}})
	w := post(m.Wrap(c), http.MethodPost, "/exports", "k", "alice", "{}")
	notRetained(t, w, http.StatusAccepted)
	if c.runs.Load() != 0 {
		t.Fatalf("the request ran again %d times", c.runs.Load())
	}
}
