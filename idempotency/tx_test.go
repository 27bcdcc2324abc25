package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sqsonce/sqsonce/idempotency"
)

// fakeTx records what the middleware does with a request's transaction;
// its Complete is applied to the store only on Commit.
type fakeTx struct {
	store     idempotency.Store
	mu        sync.Mutex
	log       []string
	key, tok  string
	resp      idempotency.Response
	commitErr error
}

func (f *fakeTx) Complete(_ context.Context, key, token string, resp idempotency.Response) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "complete")
	f.key, f.tok, f.resp = key, token, resp
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

func (f *fakeTx) Rollback(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "rollback")
	return nil
}

// The transactional mode's sequence, driver-neutral: begin before the
// handler, which finds the transaction in its context; the response
// stored in it, committed, then sent. A failed begin runs nothing and
// releases the key; a failed commit sends no 201.
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
	if got := strings.Join(tx.log, ","); got != "complete,commit" {
		t.Fatalf("transaction calls %s, want complete,commit", got)
	}
	if w := post(wrapped, http.MethodPost, "/credits", "k-1", "alice", "{}"); w.Header().Get(idempotency.HeaderReplayed) != "true" || h.runs.Load() != 1 {
		t.Fatalf("retry: %d %v after %d runs, want a replay", w.Code, w.Header(), h.runs.Load())
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
	if got := strings.Join(failing.log, ","); got != "complete,commit,rollback" {
		t.Fatalf("transaction calls %s, want complete,commit,rollback", got)
	}
	if c, err := store.Claim(context.Background(), idempotency.RecordKey("alice", "k-2"), "fp", 0); err != nil || c.Status != idempotency.Claimed {
		t.Fatalf("after a failed commit: %+v %v, want the key released", c, err)
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
