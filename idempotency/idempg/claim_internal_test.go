package idempg

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

// Under REPEATABLE READ a request's snapshot may predate the commit of
// the request that held the key before it (taken by the very statement
// that then gets the lock the other just released). The claim must still
// see that commit: it answers the stored response, not a serialization
// failure and not a second run.
func TestClaimSeesCommitAfterSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t)
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Idempotency); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{DB: pool, TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}})
	if err != nil {
		t.Fatal(err)
	}
	key := idempotency.RecordKey("alice", "k-1")
	late, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(ctx)                                              //nolint:errcheck
	if _, err := late.(*requestTx).tx.Exec(ctx, `SELECT 1`); err != nil { // the snapshot
		t.Fatal(err)
	}
	first, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := first.Claim(ctx, key, "fp")
	if err != nil || c.Status != idempotency.Claimed {
		t.Fatalf("first claim: %+v %v", c, err)
	}
	if err := first.Complete(ctx, key, c.Token, idempotency.Response{Status: http.StatusCreated, Body: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := late.Claim(ctx, key, "fp")
	if err != nil || got.Status != idempotency.Completed || got.Response.Status != http.StatusCreated || string(got.Response.Body) != "ok" {
		t.Fatalf("claim from a snapshot older than the commit: %+v %v, want the stored 201", got, err)
	}
}
