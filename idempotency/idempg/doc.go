// Package idempg is the PostgreSQL store of the idempotency middleware:
// one row per (scope, key) in sqsonce_idempotency, with the record model
// of package dedupe (a lease, token fencing, a fingerprint, expiry judged
// on read by the store's clock).
//
//	store, err := idempg.New(idempg.Config{DB: pool})
//	if err != nil { ... }
//	if err := store.Check(ctx); err != nil { ... } // table missing
//	mw, err := idempotency.New(idempotency.Config{Store: store, ScopeFunc: apiKeyID})
//
// # Schema
//
// pgstore.Migrate with pgstore.Idempotency creates the table (with the
// other sqsonce tables an application uses, in one call), recorded in
// sqsonce_schema_migrations; it is never run implicitly.
//
//	CREATE TABLE sqsonce_idempotency (
//	    key             text PRIMARY KEY,  -- idempotency.RecordKey(scope, key): unique per (scope, key)
//	    status          text NOT NULL,     -- IN_PROGRESS or COMPLETED
//	    token           text NOT NULL,
//	    fingerprint     text NOT NULL,
//	    lease_until     timestamptz,
//	    expires_at      timestamptz NOT NULL,
//	    response_status integer, response_header jsonb,
//	    response_body bytea  -- NULL on a COMPLETED row: the response was not retained
//	);
//	CREATE INDEX sqsonce_idempotency_expires_at ON sqsonce_idempotency (expires_at);
//
// The worker's role needs SELECT, INSERT, UPDATE, DELETE on
// sqsonce_idempotency and USAGE on its schema; pgstore.Migrate needs CREATE on the
// schema. PostgreSQL has no TTL: schedule [Store.Prune] (hourly).
//
// # The response in the work's transaction
//
// With idempotency.Config.BeginTxFunc set to [Store.BeginTx], the
// middleware opens a transaction per keyed request, the transaction claims
// the key, the handler does its work in it ([TxFromContext]), and the
// middleware stores the response in it and commits: the work and the
// stored response are durable together or not at all. A 5xx, a 429, a
// panic, idempotency.Release, a response too large to store, a killed
// connection or a failed commit leave neither, and the retry runs the
// handler again. A commit whose outcome is unknown (the connection died
// after sending it; Commit's error wraps idempotency.ErrOutcomeUnknown)
// is answered as such (503) and is safe too: the retry finds the
// COMPLETED record if it happened, and nothing if not.
//
//	mw, err := idempotency.New(idempotency.Config{Store: store, BeginTxFunc: store.BeginTx, ScopeFunc: apiKeyID})
//	...
//	tx := idempg.TxFromContext(r.Context()) // in the handler
//	_, err := tx.Exec(r.Context(), `INSERT INTO credits ...`, ...)
//
// # The key is held by the request's transaction
//
// In this mode there is no lease. The transaction's first statement takes
// a transaction-scoped advisory lock on the record key
// (pg_try_advisory_xact_lock of a 64-bit hash of it, seeded with the
// table's oid), then writes the IN_PROGRESS record in the transaction,
// where no other session sees it; the record is committed only COMPLETED,
// with the work. So:
//
//   - A retry while the request runs gets 409 at once (the lock is taken;
//     Retry-After: 1), without waiting on the row.
//   - A request whose process or connection dies frees its key as soon as
//     the server ends its transaction: the client's next retry runs (with
//     a lease, it got 409 until the lease ran out, 30 s by default).
//   - Nothing writes the record on another connection while the handler
//     works, so the completion never conflicts with the handler's
//     transaction at any isolation level.
//
// The lock shows in pg_locks (locktype advisory). Keys hash into the same
// 64-bit space as the application's own advisory locks: a collision costs
// at most a spurious 409.
//
// # Isolation levels
//
// Config.TxOptions sets the level of the request's transaction; READ
// COMMITTED (the default), REPEATABLE READ and SERIALIZABLE all work. The
// claim is the transaction's first statement, so under REPEATABLE READ and
// SERIALIZABLE the handler's snapshot is taken as the key is claimed: it
// sees every request of the key that committed before, and the handler's
// reads are consistent from there. (A snapshot that predates the previous
// holder's commit by the instant between the snapshot and the lock shows
// as a serialization failure on the record; the claim then starts a fresh
// transaction, before the handler runs.) A handler cannot change the level
// with SET TRANSACTION, which must come first: use Config.TxOptions, or a
// second Store with other options on the same pool for other routes. A
// serialization failure of the handler's own work is the handler's to
// answer when a statement meets it (a 5xx rolls everything back), and a
// 503 with Retry-After when the commit meets it; either way nothing is
// committed, and the retry runs the handler again in a new transaction.
//
// Use one mode per table: a lease-mode middleware (no BeginTxFunc) on the
// same table does not see the transactions' locks.
//
// Outside the middleware, [Store.CompleteTx] completes a claim inside the
// caller's own pgx.Tx. [Store.Complete] stores the response on its own and
// answers idempotency.ErrWorkUnsupported to work attached to the request
// (DynamoDB writes).
package idempg
