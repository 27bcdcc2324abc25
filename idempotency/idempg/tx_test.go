package idempg_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idempg"
	"github.com/sqsonce/sqsonce/internal/testenv"
)

// txAPI is a credits API behind the middleware in its transactional mode:
// each POST inserts a credit in the request's transaction, then runs
// fault (when set) before answering 201.
type txAPI struct {
	pool  *pgxpool.Pool
	store *idempg.Store
	mw    *idempotency.Middleware
	runs  atomic.Int64
	fault func(w http.ResponseWriter, r *http.Request) (stop bool)
}

func newTxAPI(t *testing.T) *txAPI { return newTxAPILevel(t, "") }

// newTxAPILevel is newTxAPI with the request transactions at level ("":
// the server's default).
func newTxAPILevel(t *testing.T, level pgx.TxIsoLevel) *txAPI {
	t.Helper()
	pool := newPool(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE credits (id text PRIMARY KEY, amount integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	store, err := idempg.New(idempg.Config{DB: pool, TxOptions: pgx.TxOptions{IsoLevel: level}})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.New(idempotency.Config{
		Store:       store,
		BeginTxFunc: store.BeginTx,
		ScopeFunc:   func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil },
		Lease:       10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &txAPI{pool: pool, store: store, mw: mw}
}

func (a *txAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := a.runs.Add(1)
		tx := idempg.TxFromContext(r.Context())
		if tx == nil {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		id := fmt.Sprintf("c-%d", n)
		if _, err := tx.Exec(r.Context(), `INSERT INTO credits VALUES ($1, 5)`, id); err != nil {
			http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if a.fault != nil && a.fault(w, r) {
			return
		}
		w.Header().Set("Location", "/credits/"+id)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"credit_id":%q}`, id)
	})).ServeHTTP(w, r)
}

func (a *txAPI) post(key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader(`{"amount":5}`))
	r.Header.Set("Authorization", "alice")
	r.Header.Set(idempotency.HeaderKey, key)
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	return w
}

// credits returns the committed credit ids.
func (a *txAPI) credits(t *testing.T) []string {
	t.Helper()
	rows, err := a.pool.Query(context.Background(), `SELECT id FROM credits ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// records counts the stored idempotency records.
func (a *txAPI) records(t *testing.T) int {
	t.Helper()
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+"sqsonce_idempotency").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The credit and the stored response commit in one transaction; a retry
// replays the response and credits nothing more.
func TestTxModeCommitsWorkWithResponse(t *testing.T) {
	t.Parallel()
	a := newTxAPI(t)
	first := a.post("k-1")
	if first.Code != http.StatusCreated || first.Body.String() != `{"credit_id":"c-1"}` {
		t.Fatalf("first POST: %d %s", first.Code, first.Body)
	}
	if got := fmt.Sprint(a.credits(t)); got != "[c-1]" {
		t.Fatalf("credits %s, want [c-1]", got)
	}
	c, err := a.store.Claim(context.Background(), idempotency.RecordKey("alice", "k-1"), "other", time.Minute)
	if err != nil || c.Status != idempotency.KeyReused {
		t.Fatalf("record after the commit: %+v %v, want a stored record", c, err)
	}
	again := a.post("k-1")
	if again.Code != http.StatusCreated || again.Body.String() != first.Body.String() ||
		again.Header().Get(idempotency.HeaderReplayed) != "true" || again.Header().Get("Location") != "/credits/c-1" {
		t.Fatalf("retry: %d %v %s, want the stored 201 replayed", again.Code, again.Header(), again.Body)
	}
	if got := fmt.Sprint(a.credits(t)); got != "[c-1]" || a.runs.Load() != 1 {
		t.Fatalf("after the retry: credits %s, %d handler runs; want [c-1] and 1", got, a.runs.Load())
	}
	if got := a.mw.Count(idempotency.OutcomeExecuted); got != 1 {
		t.Fatalf("OutcomeExecuted %d, want 1", got)
	}
}

// A record completed "not retained" (response_body NULL: the lease mode
// completes one so when a response cannot be stored) is answered by the
// transaction's claim as such: its status and a TypeNotRetained problem,
// never an empty body passed off as the response, and nothing runs again.
func TestTxModeReplaysNotRetained(t *testing.T) {
	t.Parallel()
	a := newTxAPI(t)
	if w := a.post("k-1"); w.Code != http.StatusCreated {
		t.Fatalf("first POST: %d %s", w.Code, w.Body)
	}
	if _, err := a.pool.Exec(context.Background(), `UPDATE `+"sqsonce_idempotency"+` SET response_body = NULL`); err != nil {
		t.Fatal(err)
	}
	w := a.post("k-1")
	if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "true" ||
		!strings.Contains(w.Body.String(), idempotency.TypeNotRetained) || a.runs.Load() != 1 {
		t.Fatalf("retry: %d %v %s after %d runs, want the 201 replayed as not retained and 1 run", w.Code, w.Header(), w.Body, a.runs.Load())
	}
}

// A request that fails after its insert (a 5xx, a panic, an aborted
// transaction, its connection killed before the commit, Release) leaves
// neither the credit nor a stored response; the retry then runs once.
func TestTxModeFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		fault  func(t *testing.T) func(w http.ResponseWriter, r *http.Request) bool
	}{
		{"ServerError", http.StatusBadGateway, func(*testing.T) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool {
				http.Error(w, "downstream failed", http.StatusBadGateway)
				return true
			}
		}},
		{"Release", http.StatusTooManyRequests, func(*testing.T) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool {
				idempotency.Release(r.Context())
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return true
			}
		}},
		{"Panic", 0, func(*testing.T) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool { panic("handler bug") }
		}},
		{"AbortedTransaction", http.StatusServiceUnavailable, func(*testing.T) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool {
				// A failed statement the handler ignores: the commit cannot
				// succeed, and the 201 it writes must not reach the client.
				_, _ = idempg.TxFromContext(r.Context()).Exec(r.Context(), `SELECT 1/0`)
				return false
			}
		}},
		{"ConnectionKilledBeforeCommit", http.StatusServiceUnavailable, func(t *testing.T) func(http.ResponseWriter, *http.Request) bool {
			return func(w http.ResponseWriter, r *http.Request) bool {
				var pid uint32
				if err := idempg.TxFromContext(r.Context()).QueryRow(r.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					t.Errorf("backend pid: %v", err)
				}
				testenv.PostgresTerminate(t, pid) // a crash or failover between the work and the commit
				return false
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newTxAPI(t)
			a.fault = tc.fault(t)
			var w *httptest.ResponseRecorder
			panicked := func() (p any) {
				defer func() { p = recover() }()
				w = a.post("k-1")
				return nil
			}()
			if tc.status == 0 && panicked == nil {
				t.Fatal("the handler's panic did not reach the server")
			}
			if tc.status != 0 && (w.Code != tc.status) {
				t.Fatalf("failed request: %d %s, want %d", w.Code, w.Body, tc.status)
			}
			if ids, n := a.credits(t), a.records(t); len(ids) != 0 || n != 0 {
				t.Fatalf("after the failure: credits %v and %d stored records, want neither", ids, n)
			}
			a.fault = nil
			w = a.post("k-1")
			if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
				t.Fatalf("retry: %d %s, want a fresh 201", w.Code, w.Body)
			}
			w = a.post("k-1")
			if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "true" {
				t.Fatalf("second retry: %d %s, want the 201 replayed", w.Code, w.Body)
			}
			if ids := a.credits(t); fmt.Sprint(ids) != "[c-2]" || a.runs.Load() != 2 {
				t.Fatalf("credits %v after %d runs, want only the retry's [c-2] after 2", ids, a.runs.Load())
			}
		})
	}
}

// 50 concurrent requests with one key credit once, at every isolation
// level: one runs, the others get 409 while it runs or its stored
// response after, never a failure.
func TestTxModeConcurrentSameKey(t *testing.T) {
	t.Parallel()
	for _, level := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(strings.ReplaceAll(string(level), " ", "_"), func(t *testing.T) {
			t.Parallel()
			concurrentSameKey(t, newTxAPILevel(t, level))
		})
	}
}

func concurrentSameKey(t *testing.T, a *txAPI) {
	start := make(chan struct{})
	a.fault = func(http.ResponseWriter, *http.Request) bool {
		time.Sleep(50 * time.Millisecond) // keep the key in progress while others arrive
		return false
	}
	var wg sync.WaitGroup
	codes := make([]int, 50)
	bodies := make([]string, 50)
	for i := range 50 {
		wg.Go(func() {
			<-start
			w := a.post("k-1")
			codes[i], bodies[i] = w.Code, w.Body.String()
		})
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	for i, c := range codes {
		counts[c]++
		if c == http.StatusCreated && bodies[i] != `{"credit_id":"c-1"}` {
			t.Fatalf("a 201 with body %s, want the one credit's", bodies[i])
		}
		if c != http.StatusCreated && c != http.StatusConflict {
			t.Fatalf("status %d: %s", c, bodies[i])
		}
	}
	if counts[http.StatusCreated] == 0 {
		t.Fatalf("statuses %v: no request succeeded", counts)
	}
	if ids := a.credits(t); fmt.Sprint(ids) != "[c-1]" || a.runs.Load() != 1 {
		t.Fatalf("credits %v after %d handler runs, want [c-1] after 1 (statuses %v)", ids, a.runs.Load(), counts)
	}
	if w := a.post("k-1"); w.Code != http.StatusCreated || w.Body.String() != `{"credit_id":"c-1"}` {
		t.Fatalf("replay after the burst: %d %s", w.Code, w.Body)
	}
}

// Attached work (idemdynamo.Transact's DynamoDB writes) is for the lease
// mode; in the transactional mode the handler writes in its own
// transaction, and Attach says so.
func TestTxModeRefusesTransact(t *testing.T) {
	t.Parallel()
	a := newTxAPI(t)
	a.fault = func(w http.ResponseWriter, r *http.Request) bool {
		if err := idempotency.Attach(r.Context(), nil); err != idempotency.ErrWorkUnsupported {
			t.Errorf("Attach in the transactional mode: %v, want ErrWorkUnsupported", err)
		}
		return false
	}
	if w := a.post("k-1"); w.Code != http.StatusCreated {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// A request whose connection dies mid-transaction (a crash of the API, a
// failover) holds its key no longer than its transaction: the next retry
// runs at once instead of answering 409 until a lease ends (before the
// key was held by the transaction: 409 for the whole 10 s lease here, 30 s
// by default).
func TestTxModeDeadConnectionFreesKey(t *testing.T) {
	t.Parallel()
	a := newTxAPI(t)
	started := make(chan uint32, 1)
	resume := make(chan struct{})
	a.fault = func(w http.ResponseWriter, r *http.Request) bool {
		if a.runs.Load() != 1 {
			return false
		}
		var pid uint32
		if err := idempg.TxFromContext(r.Context()).QueryRow(r.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Errorf("backend pid: %v", err)
		}
		started <- pid
		<-resume
		return false
	}
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- a.post("k-1") }()
	pid := <-started

	// The connection dies; the wait (up to 10 s) returns once the backend
	// has exited and its transaction, locks included, is gone.
	var gone bool
	if err := a.pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, int32(pid)).Scan(&gone); err != nil || !gone {
		t.Fatalf("pg_terminate_backend(%d, 10000) = %v, %v", pid, gone, err)
	}
	retry := a.post("k-1")
	close(resume)
	w := <-first
	if retry.Code != http.StatusCreated || retry.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("first retry after the connection died: %d %s, want a fresh 201", retry.Code, strings.TrimSpace(retry.Body.String()))
	}
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("the request whose connection died: %d %s, want 503", w.Code, w.Body)
	}
	if again := a.post("k-1"); again.Code != http.StatusCreated || again.Body.String() != retry.Body.String() ||
		again.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("second retry: %d %s, want the first retry's 201 replayed", again.Code, again.Body)
	}
	if ids := a.credits(t); fmt.Sprint(ids) != "[c-2]" || a.runs.Load() != 2 {
		t.Fatalf("credits %v after %d runs, want only the retry's [c-2] after 2", ids, a.runs.Load())
	}
}
