package limitpg_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/limit"
	"github.com/sqsonce/sqsonce/limit/limitpg"
	"github.com/sqsonce/sqsonce/limit/limittest"
	"github.com/sqsonce/sqsonce/pgstore"
)

// newPool returns a pool on a fresh schema holding the limits tables.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testenv.Postgres(t)
	if _, err := pgstore.Migrate(context.Background(), pool, pgstore.Limits); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return pool
}

func newStore(t *testing.T, pool *pgxpool.Pool, now func() time.Time) *limitpg.Store {
	t.Helper()
	s, err := limitpg.New(limitpg.Config{DB: pool, NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs the suite on PostgreSQL: block leasing, two
// workers' stores sharing one rate and one key's slots, a crashed
// worker's slots expiring.
func TestConformance(t *testing.T) {
	pool := newPool(t)
	stores := func(t *testing.T, now func() time.Time) limit.Store { return newStore(t, pool, now) }
	limittest.Run(t, stores)
	limittest.RunRate(t, stores)
}

// TestRowsStayBounded: a key's slots taken and released many times leave
// no row; a crashed holder's expired row is taken over, not added to.
func TestRowsStayBounded(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	now := time.Now()
	var mu sync.Mutex
	s := newStore(t, pool, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	ctx := context.Background()
	for i := range 20 {
		sl := limit.Slot{Name: "n", Key: "k", Holder: "h" + string(rune('a'+i))}
		if ok, err := s.Acquire(ctx, sl, 2, time.Minute); err != nil || !ok {
			t.Fatalf("Acquire %d: %v %v", i, ok, err)
		}
		if err := s.Release(ctx, sl); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 { // two crashed holders
		if ok, _ := s.Acquire(ctx, limit.Slot{Name: "n", Key: "k", Holder: "crashed" + string(rune('0'+i))}, 2, time.Minute); !ok {
			t.Fatal("crashed holder: refused")
		}
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	for i := range 2 {
		if ok, _ := s.Acquire(ctx, limit.Slot{Name: "n", Key: "k", Holder: "next" + string(rune('0'+i))}, 2, time.Minute); !ok {
			t.Fatal("after the crashed holders' expiry: refused")
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sqsonce_limit_slots`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d rows (%v), want 2: the two slots", rows, err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	if err := newStore(t, newPool(t), time.Now).Check(context.Background()); err != nil {
		t.Fatalf("Check after Migrate: %v", err)
	}
	err := newStore(t, testenv.Postgres(t), time.Now).Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "pgstore.Limits") {
		t.Fatalf("Check without the tables: %v, want an error naming pgstore.Limits", err)
	}
}
