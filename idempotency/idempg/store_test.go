package idempg_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/idempotency/idempg"
	"github.com/sqsonce/sqsonce/idempotency/idemtest"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testenv.Postgres(t)
	if _, err := pgstore.Migrate(context.Background(), pool, pgstore.Idempotency); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return pool
}

func TestConformance(t *testing.T) {
	pool := newPool(t)
	idemtest.Run(t, func(t *testing.T, now func() time.Time) idempotency.Store {
		s, err := idempg.New(idempg.Config{DB: pool, NowFunc: now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// CompleteTx commits the stored response with the request's work, or
// neither.
func TestCompleteTxCommitsWithTheWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE credits (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	s, err := idempg.New(idempg.Config{DB: pool})
	if err != nil {
		t.Fatal(err)
	}
	resp := idempotency.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/credits/c-1"}}, Body: []byte("ok")}
	key := idempotency.RecordKey("scope", "k-1")
	c, err := s.Claim(ctx, key, "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	id := "c-1"
	work := func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO credits VALUES ($1)`, id); err != nil {
			return err
		}
		return s.CompleteTx(ctx, tx, key, c.Token, resp)
	}
	// Rolled back: neither the credit nor the response.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := work(tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, key, "fp", time.Minute); err != nil || got.Status != idempotency.InProgress {
		t.Fatalf("after a rollback: %+v %v, want still in progress", got, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM credits`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d credits after the rollback", n)
	}
	// Committed: both.
	if err := pgx.BeginFunc(ctx, pool, work); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, key, "fp", time.Minute)
	if err != nil || got.Status != idempotency.Completed || got.Response.Status != 201 || string(got.Response.Body) != "ok" ||
		got.Response.Header.Get("Location") != "/credits/c-1" {
		t.Fatalf("after the commit: %+v %v", got, err)
	}
	// A lost claim cannot complete: the work must roll back.
	id = "c-2"
	err = pgx.BeginFunc(ctx, pool, work)
	if !errors.Is(err, idempotency.ErrNotOwner) {
		t.Fatalf("CompleteTx of a completed claim: %v, want ErrNotOwner", err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM credits`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d credits, want 1", n)
	}
	// DynamoDB writes are not for this store.
	if err := s.Complete(ctx, idempotency.RecordKey("scope", "k-2"), "t", idempotency.Completion{Work: []any{"a write"}}); !errors.Is(err, idempotency.ErrWorkUnsupported) {
		t.Fatalf("Complete with writes: %v, want ErrWorkUnsupported", err)
	}
}

// A read-only transaction cannot hold the record: refused at start-up.
func TestNewRefusesReadOnlyTx(t *testing.T) {
	t.Parallel()
	_, err := idempg.New(idempg.Config{DB: struct{ pgstore.DB }{}, TxOptions: pgx.TxOptions{AccessMode: pgx.ReadOnly}})
	if err == nil || !strings.Contains(err.Error(), "TxOptions.AccessMode") {
		t.Fatalf("New with a read-only TxOptions: %v, want an error naming TxOptions.AccessMode", err)
	}
}

// TestCheck: without the table, Check fails naming the call that creates
// it; after it, Check passes and Table names it.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t)
	s, err := idempg.New(idempg.Config{DB: pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "pgstore.Migrate(ctx, pool, pgstore.Idempotency)") {
		t.Fatalf("Check without the table: %v, want an error naming pgstore.Migrate", err)
	}
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Idempotency); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil || s.Table() != "sqsonce_idempotency" {
		t.Fatalf("Check after Migrate: %v; Table() = %q", err, s.Table())
	}
}
