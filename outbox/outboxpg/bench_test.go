package outboxpg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
)

// BenchmarkPut is one transaction writing one event.
func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	pool := newPoolTB(b)
	st, _ := outboxpg.New(outboxpg.Config{DB: pool})
	i := 0
	for b.Loop() {
		i++
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return st.Put(ctx, tx, outbox.Event{Entity: fmt.Sprintf("e%d", i%100), Payload: "x"})
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDueBacklog reads a batch of 100 heads with 100,000 pending
// events of 1,000 entities (one relay holding every partition).
func BenchmarkDueBacklog(b *testing.B) {
	ctx := context.Background()
	pool := newPoolTB(b)
	st, _ := outboxpg.New(outboxpg.Config{DB: pool})
	if _, err := pool.Exec(ctx, `INSERT INTO sqsonce_outbox (entity_key, seq, id, entity, partition, payload, created_at)
		SELECT 'e' || (i % 1000), i, 'id' || i, 'e' || (i % 1000), (i % 1000) % 16, 'payload', now()
		FROM generate_series(1, 100000) i; ANALYZE sqsonce_outbox`); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		evs, err := st.Due(ctx, "r1", 100)
		if err != nil || len(evs) != 100 {
			b.Fatalf("Due: %d %v", len(evs), err)
		}
	}
}

// BenchmarkDueRunsManyEntities is a relay's read of its next batch with
// 2,500 pending events of 100 entities, written in turn, while its last
// batch of 100 (one event of each entity) is being sent: the bench's
// relay row.
func BenchmarkDueRunsManyEntities(b *testing.B) {
	ctx := context.Background()
	pool := newPoolTB(b)
	st, _ := outboxpg.New(outboxpg.Config{DB: pool})
	for from := 0; from < 2500; from += 100 {
		evs := make([]outbox.Event, 100)
		for i := range evs {
			evs[i] = outbox.Event{Entity: fmt.Sprintf("e%d", i), Payload: "payload"}
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Put(ctx, tx, evs...) }); err != nil {
			b.Fatal(err)
		}
	}
	inFlight, err := st.DueRuns(ctx, "r1", 100, nil)
	if err != nil || len(inFlight) != 100 {
		b.Fatalf("DueRuns: %d %v", len(inFlight), err)
	}
	for b.Loop() {
		evs, err := st.DueRuns(ctx, "r1", 100, inFlight)
		if err != nil || len(evs) != 100 {
			b.Fatalf("DueRuns: %d %v", len(evs), err)
		}
	}
}
