package idempg_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idempg"
)

// extendSignal is the store with every Extend counted, the first one
// signalled.
type extendSignal struct {
	idempotency.Store
	extended chan struct{}
	n        atomic.Int64
}

func (s *extendSignal) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	err := s.Store.Extend(ctx, key, token, lease)
	if s.n.Add(1) == 1 {
		close(s.extended)
	}
	return err
}

// At every isolation level, a handler that runs longer than a third of
// the lease (when a lease keeper used to write the record row on another
// connection, which made the completion in the request's transaction a
// serialization failure under REPEATABLE READ and SERIALIZABLE: 503 and
// nothing committed) commits its work with the stored response: 201, one
// credit, and the retry replayed.
func TestTxModeIsolationLevels(t *testing.T) {
	t.Parallel()
	for _, level := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(strings.ReplaceAll(string(level), " ", "_"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := newPool(t)
			if _, err := pool.Exec(ctx, `CREATE TABLE credits (id text PRIMARY KEY, amount integer NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			store, err := idempg.New(idempg.Config{DB: pool, TxOptions: pgx.TxOptions{IsoLevel: level}})
			if err != nil {
				t.Fatal(err)
			}
			const lease = 600 * time.Millisecond
			sig := &extendSignal{Store: store, extended: make(chan struct{})}
			mw, err := idempotency.New(idempotency.Config{Store: sig, BeginTxFunc: store.BeginTx, Lease: lease,
				ScopeFunc: func(r *http.Request) (string, error) { return "alice", nil }})
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				tx := idempg.TxFromContext(r.Context())
				var got string
				if err := tx.QueryRow(r.Context(), `SHOW transaction_isolation`).Scan(&got); err != nil || got != strings.ToLower(string(level)) {
					http.Error(w, "isolation "+got, http.StatusInternalServerError)
					return
				}
				if _, err := tx.Exec(r.Context(), `INSERT INTO credits VALUES ('c-1', 5)`); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				// Longer than Lease/3: past a lease extension, if one runs.
				select {
				case <-sig.extended:
				case <-time.After(lease):
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"credit_id":"c-1"}`))
			}))
			post := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader(`{"amount":5}`))
				r.Header.Set(idempotency.HeaderKey, "k-1")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			if w := post(); w.Code != http.StatusCreated {
				t.Fatalf("%s: %d %s, want 201", level, w.Code, strings.TrimSpace(w.Body.String()))
			}
			if w := post(); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "true" || w.Body.String() != `{"credit_id":"c-1"}` {
				t.Fatalf("%s: retry: %d %s, want the 201 replayed", level, w.Code, w.Body)
			}
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM credits`).Scan(&n); err != nil || n != 1 || runs.Load() != 1 {
				t.Fatalf("%s: %d credits (%v) after %d runs, want 1 after 1", level, n, err, runs.Load())
			}
			if n := sig.n.Load(); n != 0 {
				t.Fatalf("%s: %d lease extensions wrote the record while the transaction ran, want none", level, n)
			}
		})
	}
}
