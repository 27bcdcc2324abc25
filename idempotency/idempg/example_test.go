package idempg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idempg"
	"github.com/sqsonce/sqsonce/pgstore"
)

// In the transactional mode the handler's INSERT and the stored response
// commit in one transaction. The first attempt fails after its INSERT (a
// 503): nothing of it is left, so the client's retry runs the handler
// again; the retry after that is replayed. One credit in all (id 2: the
// rolled-back INSERT took 1 from the sequence).
func ExampleStore_BeginTx() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	schema := fmt.Sprintf("example_%x", rand.Uint64()) // the example's own tables
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		panic(err)
	}
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE") //nolint:errcheck
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Idempotency); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE credits (id serial PRIMARY KEY, amount integer NOT NULL)`); err != nil {
		panic(err)
	}

	store, err := idempg.New(idempg.Config{DB: pool})
	if err != nil {
		panic(err)
	}
	mw, err := idempotency.New(idempotency.Config{
		Store:       store,
		BeginTxFunc: store.BeginTx, // each keyed request runs in a transaction that holds its key
		ScopeFunc:   func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil },
	})
	if err != nil {
		panic(err)
	}
	downstreamUp := false
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := idempg.TxFromContext(r.Context())
		var id int
		if err := tx.QueryRow(r.Context(), `INSERT INTO credits (amount) VALUES (5) RETURNING id`).Scan(&id); err != nil {
			http.Error(w, "could not credit", http.StatusInternalServerError)
			return
		}
		if !downstreamUp {
			http.Error(w, "try again", http.StatusServiceUnavailable) // a 5xx rolls the INSERT back
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"credit_id":%d}`, id)
	}))

	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/credits", strings.NewReader(`{"amount":5}`))
		r.Header.Set("Authorization", "alice")
		r.Header.Set(idempotency.HeaderKey, "8e03978e")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var credits int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM credits`).Scan(&credits)
		fmt.Println(w.Code, w.Header().Get(idempotency.HeaderReplayed), strings.TrimSpace(w.Body.String()), "credits:", credits)
		downstreamUp = true
	}
	// Output:
	// 503  try again credits: 0
	// 201  {"credit_id":2} credits: 1
	// 201 true {"credit_id":2} credits: 1
}
