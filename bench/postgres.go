package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/pgstore"
)

// pgConcurrency is the worker count of the PostgreSQL dedupe rows and the
// pool's size.
const pgConcurrency = 16

// pgSkipped is why the PostgreSQL rows are missing from a table.
const pgSkipped = "PostgreSQL rows skipped: DATABASE_URL is not set (the local stack's env sets it)"

// postgresPool connects to DATABASE_URL on a fresh schema (every
// connection's search_path), dropped by the returned cleanup.
func postgresPool(ctx context.Context, dsn string) (*pgxpool.Pool, func(), error) {
	rb := make([]byte, 4)
	_, _ = rand.Read(rb)
	schema := "bench_" + hex.EncodeToString(rb)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("DATABASE_URL: connect: %w", err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = pgConcurrency + 2 // the workers, and the relay's lease calls
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); drop() }, nil
}

// postgresRows: dedupepg's Transactional against the textbook SQL
// transaction, and the PostgreSQL outbox relay against the plain send
// loop. Without DATABASE_URL they are skipped, and the table says so.
func (b *bench) postgresRows() ([]row, error) {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		fmt.Fprintf(b.errw, "bench:   %s\n", pgSkipped)
		b.skipped = append(b.skipped, pgSkipped)
		return nil, nil
	}
	ctx := b.ctx
	pool, cleanup, err := postgresPool(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if _, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe, pgstore.Outbox); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);
		CREATE TABLE journal (message_id text PRIMARY KEY, amount bigint NOT NULL);
		CREATE TABLE processed_messages (message_id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO accounts SELECT 'a' || i, 0 FROM generate_series(0, 99) i`); err != nil {
		return nil, err
	}
	rows, err := b.pgDedupe(pool)
	if err != nil {
		return nil, err
	}

	n := max(b.n/4, 10)
	store, err := outboxpg.New(outboxpg.Config{DB: pool})
	if err != nil {
		return nil, err
	}
	commit := func(ctx context.Context, evs []outbox.Event) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return store.Put(ctx, tx, evs...) })
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE plain_outbox (id bigserial PRIMARY KEY, event_id text NOT NULL, type text NOT NULL, payload text NOT NULL)`); err != nil {
		return nil, err
	}
	relay, plain, tb, err := b.relayRows("outbox-pg", n, store, commit, textbookPostgres{pool: pool})
	if err != nil {
		return nil, err
	}
	few, err := b.relayFewRow("outbox-pg-few", "PostgreSQL", n, store, commit)
	if err != nil {
		return nil, err
	}
	return append(append(rows, b.relayPair("PostgreSQL", n, relay, plain, tb,
		"the textbook relay: BEGIN, SELECT 100 rows ORDER BY id FOR UPDATE SKIP LOCKED, send them, DELETE them, COMMIT")...), few), nil
}

// textbookPostgres is the textbook relay loop over a plain outbox table.
type textbookPostgres struct{ pool *pgxpool.Pool }

func (t textbookPostgres) preload(ctx context.Context, evs []outbox.Event) error {
	ids, types, payloads := make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs))
	for i, ev := range evs {
		ids[i], types[i], payloads[i] = ev.ID, ev.Type, ev.Payload
	}
	_, err := t.pool.Exec(ctx, `INSERT INTO plain_outbox (event_id, type, payload) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])`, ids, types, payloads)
	return err
}

func (t textbookPostgres) relay(ctx context.Context, client *sqs.Client, queueURL string, n int) (float64, error) {
	start := time.Now()
	sent := 0
	for {
		got := 0
		err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id, event_id, type, payload FROM plain_outbox ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED`)
			if err != nil {
				return err
			}
			var ids []int64
			var evs []outbox.Event
			for rows.Next() {
				var id int64
				var ev outbox.Event
				if err := rows.Scan(&id, &ev.ID, &ev.Type, &ev.Payload); err != nil {
					rows.Close()
					return err
				}
				ids, evs = append(ids, id), append(evs, ev)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if got = len(evs); got == 0 {
				return nil
			}
			if _, err := plainSend(ctx, client, queueURL, evs); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `DELETE FROM plain_outbox WHERE id = ANY($1)`, ids)
			return err
		})
		if err != nil {
			return 0, err
		}
		if got == 0 {
			break
		}
		sent += got
	}
	if sent != n {
		return 0, fmt.Errorf("textbook relay sent %d of %d events", sent, n)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// credit is the business write of the PostgreSQL dedupe rows: a journal
// row keyed by the message and a balance update of one of 100 accounts,
// chosen by the id's hash.
func credit(ctx context.Context, tx pgx.Tx, id string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO journal VALUES ($1, 1)`, id); err != nil {
		return err
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = $1`, fmt.Sprintf("a%d", h.Sum32()%100))
	return err
}

// errDuplicate is the textbook loop's duplicate: processed_messages
// already had the id.
var errDuplicate = errors.New("duplicate")

// pgDedupe: Transactional's handler called directly (no SQS: the row
// isolates the store) against the textbook transaction, interleaved.
func (b *bench) pgDedupe(pool *pgxpool.Pool) ([]row, error) {
	ctx := b.ctx
	n := max(b.n/2, 10)
	store, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: "bench"})
	if err != nil {
		return nil, err
	}
	h := dedupepg.Transactional(store, func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
		return credit(ctx, tx, msg.Key())
	}, nil)
	var plain, tx sample
	if err := b.interleave("postgres dedupe", func(round int) ([]float64, error) {
		var p, t float64
		// The ids and messages are made before the clock starts: the row
		// measures the store, not the test package's message builder.
		ids, msgs := make([]string, n), make([]*consumer.Message, n)
		for i := range msgs {
			ids[i] = fmt.Sprintf("plain-%d-%d", round, i)
			msgs[i] = consumertest.NewMessage(`{"amount":1}`, consumertest.WithID(fmt.Sprintf("tx-%d-%d", round, i)))
		}
		err := inTurn(round, measured(&p, "textbook transaction loop", func() (float64, error) {
			return workers(n, pgConcurrency, func(i int) error {
				id := ids[i-1] // workers counts from 1
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					tag, err := tx.Exec(ctx, `INSERT INTO processed_messages (message_id) VALUES ($1) ON CONFLICT DO NOTHING`, id)
					if err != nil {
						return err
					}
					if tag.RowsAffected() == 0 {
						return errDuplicate
					}
					return credit(ctx, tx, id)
				})
			})
		}), measured(&t, "transactional", func() (float64, error) {
			return workers(n, pgConcurrency, func(i int) error {
				return h.Handle(ctx, msgs[i-1])
			})
		}))
		return []float64{p, t}, err
	}, &plain, &tx); err != nil {
		return nil, err
	}
	return []row{
		row{group: "Dedupe, PostgreSQL", name: "dedupepg Transactional vs textbook transaction", value: tx, limit: plain, ratio: ratios(tx, plain), unit: "msgs/s",
			note: fmt.Sprintf("%s; %d messages per run, the handler called directly from %d goroutines (no SQS: the row isolates the store); "+
				"both sides: BEGIN, the dedupe row, INSERT journal, UPDATE accounts, COMMIT; limit: the textbook form, INSERT INTO processed_messages ... ON CONFLICT DO NOTHING; "+
				"target: the same four statements and round trips in one transaction (TestTransactionalStatements), Transactional's row only has more columns, so ≥ 0.95", b.interleaved(), n, pgConcurrency)}.with(atLeast(0.95)),
	}, nil
}
