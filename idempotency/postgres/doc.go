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
//	    response_status integer, response_header jsonb, response_body bytea
//	);
//	CREATE INDEX sqsonce_idempotency_expires_at ON sqsonce_idempotency (expires_at);
//
// The worker's role needs SELECT, INSERT, UPDATE, DELETE on
// sqsonce_idempotency and USAGE on its schema; Migrate needs CREATE on the
// schema. PostgreSQL has no TTL: schedule [Store.Prune] (hourly).
//
// # The response in the work's transaction
//
// [Store.CompleteTx] completes a claim inside the caller's pgx.Tx, so the
// request's SQL work and its stored response commit together or not at
// all. [Store.Complete] (what the middleware calls) stores the response on
// its own and answers idempotency.ErrWritesUnsupported to DynamoDB writes.
package postgres
