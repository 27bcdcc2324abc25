package outboxpg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/outbox/outboxtest"
	"github.com/sqsonce/sqsonce/pgstore"
)

// newPool returns a pool on a fresh schema holding the outbox tables.
func newPool(t *testing.T) *pgxpool.Pool { return newPoolTB(t) }

func newPoolTB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := testenv.Postgres(t)
	if v, err := pgstore.Migrate(context.Background(), pool, pgstore.Outbox); err != nil || fmt.Sprint(v[pgstore.Outbox]) != "[1 2 3 4]" {
		t.Fatalf("Migrate: %v %v", v, err)
	}
	if v, err := pgstore.Migrate(context.Background(), pool, pgstore.Outbox); err != nil || len(v) != 0 {
		t.Fatalf("Migrate again: applied %v (%v), want nothing", v, err)
	}
	return pool
}

func newStore(t *testing.T, pool *pgxpool.Pool, cfg outboxpg.Config) *outboxpg.Store {
	t.Helper()
	cfg.DB = pool
	st, err := outboxpg.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// commit writes evs in one transaction.
func commit(ctx context.Context, pool *pgxpool.Pool, st *outboxpg.Store, evs ...outbox.Event) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Put(ctx, tx, evs...) })
}

func TestConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) outboxtest.Harness {
		clock := outboxtest.NewClock()
		pool := newPool(t)
		st := newStore(t, pool, outboxpg.Config{NowFunc: clock.Now, Lease: 10 * time.Second})
		return outboxtest.Harness{
			Store:  st,
			Commit: func(ctx context.Context, evs ...outbox.Event) error { return commit(ctx, pool, st, evs...) },
			Clock:  clock,
			Lease:  10 * time.Second,
		}
	})
}
