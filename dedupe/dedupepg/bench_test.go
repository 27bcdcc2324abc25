package dedupepg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

// benchPool returns a pool on a fresh schema with the dedupe table and
// the effect's tables.
func benchPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	ctx := context.Background()
	pool := testenv.Postgres(b)
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);
		CREATE TABLE journal (message_id text PRIMARY KEY, amount bigint NOT NULL);
		INSERT INTO accounts SELECT 'a' || i, 0 FROM generate_series(0, 99) i`); err != nil {
		b.Fatal(err)
	}
	return pool
}

func effect(ctx context.Context, tx pgx.Tx, id string, i int) error {
	if _, err := tx.Exec(ctx, `INSERT INTO journal VALUES ($1, 1)`, id); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = $1`, fmt.Sprintf("a%d", i%100))
	return err
}

// BenchmarkTransactional is one message through Transactional: the dedupe
// row, an INSERT and an UPDATE in one transaction.
func BenchmarkTransactional(b *testing.B) {
	s, err := dedupepg.New(dedupepg.Config{DB: benchPool(b), Namespace: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	h := dedupepg.Transactional(s, func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
		return effect(ctx, tx, msg.Key(), i)
	}, nil)
	ctx := context.Background()
	for b.Loop() {
		i++
		msg := consumertest.NewMessage("x", consumertest.WithID(fmt.Sprintf("m-%d", i)))
		if err := h.Handle(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainTransaction is the same INSERT and UPDATE in a transaction
// without the dedupe row: the baseline.
func BenchmarkPlainTransaction(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return effect(ctx, tx, fmt.Sprintf("m-%d", i), i) }); err != nil {
			b.Fatal(err)
		}
	}
}
