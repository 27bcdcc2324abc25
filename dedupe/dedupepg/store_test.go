package dedupepg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/dedupe/dedupetest"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

// newPool returns a pool on a fresh schema holding the dedupe table.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testenv.Postgres(t)
	if _, err := pgstore.Migrate(context.Background(), pool, pgstore.Dedupe); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return pool
}

func newStore(t *testing.T, pool *pgxpool.Pool, now func() time.Time) *dedupepg.Store {
	t.Helper()
	s, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: "conformance", NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	pool := newPool(t)
	dedupetest.Run(t, func(t *testing.T, now func() time.Time) dedupe.Store {
		return newStore(t, pool, now)
	})
}

// TestCheckAfterMigrate: the table pgstore.Migrate creates is the one
// the store checks.
func TestCheckAfterMigrate(t *testing.T) {
	t.Parallel()
	s := newStore(t, newPool(t), time.Now)
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("Check after Migrate: %v", err)
	}
	if s.Table() != "sqsonce_dedupe" {
		t.Fatalf("Table() = %q", s.Table())
	}
}

func TestCheckWithoutTable(t *testing.T) {
	t.Parallel()
	s := newStore(t, testenv.Postgres(t), time.Now)
	if err := s.Check(context.Background()); err == nil {
		t.Fatal("Check passed without the table")
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	clock := dedupetest.NewClock(time.Now())
	s, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: "prune", NowFunc: clock.Now, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const old, fresh = 2500, 7
	if _, err := pool.Exec(ctx, `INSERT INTO sqsonce_dedupe (pk, status, token, fingerprint, expires_at)
		SELECT 'prune#old-' || i, 'COMPLETED', 't', 'f', $1 FROM generate_series(1, $2) i`, clock.Now().Add(time.Minute), old); err != nil {
		t.Fatal(err)
	}
	for i := range fresh {
		c, err := s.Claim(ctx, fmt.Sprintf("fresh-%d", i), "f", time.Minute)
		if err != nil || c.Status != dedupe.Claimed {
			t.Fatalf("Claim: %+v %v", c, err)
		}
	}
	clock.Advance(30 * time.Minute) // the old rows expire, the claims' records (TTL 1h) do not
	// Several workers prune at once: together they delete each row once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Go(func() {
			n, err := s.Prune(ctx, pgstore.PruneOptions{BatchSize: 100})
			if err != nil {
				t.Errorf("Prune: %v", err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	// A prune that stopped early (rows held by another) leaves the rest to
	// the next scheduled run.
	n, err := s.Prune(ctx, pgstore.PruneOptions{BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if total+n != old {
		t.Fatalf("pruned %d, want %d", total+n, old)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sqsonce_dedupe`).Scan(&left); err != nil || left != fresh {
		t.Fatalf("%d rows left (%v), want the %d live ones", left, err, fresh)
	}
	// MaxBatches bounds one call.
	if _, err := pool.Exec(ctx, `UPDATE sqsonce_dedupe SET expires_at = $1`, clock.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, pgstore.PruneOptions{BatchSize: 2, MaxBatches: 2}); err != nil || n != 4 {
		t.Fatalf("bounded Prune deleted %d (%v), want 4", n, err)
	}
}
