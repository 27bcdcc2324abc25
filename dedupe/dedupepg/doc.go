// Package dedupepg is sqsonce's PostgreSQL dedupe store: the [Store] for
// the lease-based dedupe middleware (dedupe.New), and [Transactional], which runs a
// handler's SQL in the same transaction as the message's dedupe row.
//
// # Schema
//
// pgstore.Migrate with pgstore.Dedupe creates the table (with the other
// sqsonce tables an application uses, in one call), and records its
// migrations in sqsonce_schema_migrations; it is never run implicitly.
// Call it from a deploy step or a setup command:
//
//	if _, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe); err != nil { ... }
//
// The table, in the connection's schema (search_path):
//
//	CREATE TABLE sqsonce_dedupe (
//	    pk          text        PRIMARY KEY,  -- "<namespace>#<key>" (hashed past 2048 bytes)
//	    status      text        NOT NULL,     -- IN_PROGRESS or COMPLETED
//	    token       text        NOT NULL,     -- random per claim; fences Extend/Complete/Release ('' when Transactional completed it without a claim)
//	    fingerprint text        NOT NULL,     -- hash of the body; another body = key reuse
//	    lease_until timestamptz,              -- IN_PROGRESS: when the claim may be taken over
//	    expires_at  timestamptz NOT NULL,     -- dead after this; Prune deletes it
//	    steps       jsonb,                    -- the handler's steps (package step); NULL: none
//	    unknown_step text                     -- a step of unknown outcome, for Store.Unknown; NULL: none
//	);
//	-- Prune's scan (expires_at) and Store.Unknown's (unknown_step IS NOT
//	-- NULL): one BRIN index, so that a row written is entered in the
//	-- primary key only (PostgreSQL 14 or later for minmax_multi).
//	CREATE INDEX sqsonce_dedupe_brin ON sqsonce_dedupe
//	    USING brin (expires_at timestamptz_minmax_multi_ops, unknown_step);
//
// Tables created before that index had a btree on expires_at
// (sqsonce_dedupe_expires_at), then a BRIN index on it
// (sqsonce_dedupe_expires_at_brin, migration 3), a partial btree on
// unknown_step (sqsonce_dedupe_unknown_step) and a CHECK on status;
// pgstore.Migrate replaces the indexes with the one above and drops the
// CHECK (migrations 3 and 4). Building a BRIN index holds writes to the
// table for one pass over it; on a large table in use, build it first
// without that lock, then run Migrate, which is left only the CHECK and
// the old BRIN index to drop (a moment's lock each):
//
//	CREATE INDEX CONCURRENTLY IF NOT EXISTS sqsonce_dedupe_brin ON sqsonce_dedupe
//	    USING brin (expires_at timestamptz_minmax_multi_ops, unknown_step);
//	DROP INDEX CONCURRENTLY IF EXISTS sqsonce_dedupe_expires_at;
//	DROP INDEX CONCURRENTLY IF EXISTS sqsonce_dedupe_unknown_step;
//
// A table that has not had migration 3 also needs, before Migrate, the
// BRIN index migration 3 builds (Migrate's migration 4 then drops it):
//
//	CREATE INDEX CONCURRENTLY IF NOT EXISTS sqsonce_dedupe_expires_at_brin ON sqsonce_dedupe
//	    USING brin (expires_at timestamptz_minmax_multi_ops);
//
// Until then the store works on the old table as before.
//
// A claim is one INSERT ... ON CONFLICT (pk) DO UPDATE ... WHERE the old
// row is dead (expired, or IN_PROGRESS with an ended lease); a live row is
// then read to answer duplicate, in progress or key reuse. Leases and
// expiry are judged by the store's clock (Config.NowFunc), not the
// server's.
//
// # Privileges
//
// The worker's role needs, on the dedupe table only:
//
//	GRANT SELECT, INSERT, UPDATE, DELETE ON sqsonce_dedupe TO worker;
//
// plus USAGE on its schema. pgstore.Migrate needs CREATE on the schema (give it
// to the deploy role, which then owns the tables), and creates
// sqsonce_schema_migrations; the worker needs nothing on that table.
//
// # Lease mode: external side effects
//
//	store, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: "orders"})
//	if err != nil { ... }
//	if err := store.Check(ctx); err != nil { ... } // table missing
//	dd, err := dedupe.New(dedupe.Config{Store: store})
//	if err != nil { ... }
//	c, err := consumer.New(consumer.Config{
//		Handler:    consumer.HandlerFunc(sendEmail),
//		Middleware: []consumer.Middleware{dd.Wrap},
//		...
//	})
//
// # Transactional mode: effects in PostgreSQL, exactly once
//
//	handler := dedupepg.Transactional(store, func(ctx context.Context, tx pgx.Tx, msg *consumer.Message) error {
//		var e Credit
//		if err := json.Unmarshal([]byte(msg.Body), &e); err != nil {
//			return consumer.Permanent(err)
//		}
//		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + $2 WHERE id = $1`, e.Account, e.Amount)
//		return err
//	}, nil)
//
// The dedupe row is inserted first in the transaction, the handler's
// statements follow, and the commit makes both durable or neither: a
// crash, a killed backend or a lost connection before the commit leaves
// nothing (the redelivery applies the effect); after it, every redelivery
// is acked as a duplicate, also when the commit's answer was lost.
// Concurrent deliveries of one key wait on the row's unique index for the
// first to end, so the effect runs once. Serialization failures (40001),
// deadlocks (40P01) and lost connections (pgstore.IsTransient) are run
// again in a new transaction ([TxOptions].Retries), then left to the
// consumer's retry.
// Keep the transaction short: it holds the dedupe row's lock while the
// handler runs.
//
// A duplicate of a committed message never runs the handler's function:
// the row's INSERT finds the COMPLETED row first. It still costs a
// transaction (BEGIN, the INSERT, a SELECT, ROLLBACK).
// [TxOptions].SkipCompleted replaces that with one SELECT before the
// transaction, at the price of that SELECT on every message: worth it when
// duplicates are common.
//
// # Pruning
//
// PostgreSQL has no TTL. Records carry expires_at (Config.TTL, 30 days by
// default) and are dead for Claim once it passes, pruned or not;
// [Store.Prune] deletes them in short batches (pgstore.PruneOptions: 1000
// rows per DELETE, at most 100 DELETEs per call by default, FOR UPDATE SKIP LOCKED so several
// workers can prune at once without waiting on each other or on claims).
// Schedule it: hourly from each worker, or every few minutes from one cron
// job when a worker writes more than 100,000 keys an hour.
package dedupepg
