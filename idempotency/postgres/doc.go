// Package postgres is the PostgreSQL store of the idempotency middleware:
// one row per (scope, key) in sqsonce_idempotency, with the record model
// of package dedupe (a lease, token fencing, a fingerprint, expiry judged
// on read by the store's clock).
//
//	store, err := postgres.New(postgres.Config{DB: pool})
//	if err != nil { ... }
//	mw, err := idempotency.New(idempotency.Config{Store: store, ScopeFunc: apiKeyID})
//
// # Schema
//
// [Migrate] applies the embedded migrations in one transaction, recorded
// in sqsonce_schema_migrations; it is never run implicitly.
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
// sqsonce_idempotency and USAGE on its schema; Migrate needs CREATE on the
// schema. PostgreSQL has no TTL: schedule [Store.Prune] (hourly).
//
// # The response in the work's transaction
//
// With idempotency.Config.BeginTxFunc set to [Store.BeginTx], the
// middleware opens a transaction per claimed request, the handler does its
// work in it ([TxFromContext]), and the middleware stores the response in
// it and commits: the work and the stored response are durable together
// or not at all. A 5xx, a panic, idempotency.Release, a killed connection
// or a failed commit leave neither, and the key is released for the
// retry. A commit whose outcome is unknown (the connection died after
// sending it; Commit's error wraps idempotency.ErrOutcomeUnknown) is
// answered as such (503) and is safe too: the release is fenced on
// IN_PROGRESS, so a commit that happened keeps its record and the retry
// replays it.
//
//	mw, err := idempotency.New(idempotency.Config{Store: store, BeginTxFunc: store.BeginTx, ScopeFunc: apiKeyID})
//	...
//	tx := postgres.TxFromContext(r.Context()) // in the handler
//	_, err := tx.Exec(r.Context(), `INSERT INTO credits ...`, ...)
//
// Outside the middleware, [Store.CompleteTx] completes a claim inside the
// caller's own pgx.Tx. [Store.Complete] stores the response on its own and
// answers idempotency.ErrWritesUnsupported to DynamoDB writes.
package postgres
