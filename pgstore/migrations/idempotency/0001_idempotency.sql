-- One row per (scope, key): key is idempotency.RecordKey(scope, key), the
-- hex SHA-256 of both, so the primary key is the unique constraint on
-- (scope, key) and neither is stored in clear.
CREATE TABLE sqsonce_idempotency (
    key             text        PRIMARY KEY,
    status          text        NOT NULL CHECK (status IN ('IN_PROGRESS', 'COMPLETED')),
    token           text        NOT NULL,  -- random per claim; fences Extend, Complete and Release
    fingerprint     text        NOT NULL,  -- method, path, query, body: another request = key reuse
    lease_until     timestamptz,           -- IN_PROGRESS: when the claim may be taken over
    expires_at      timestamptz NOT NULL,  -- dead after this; Prune deletes it
    response_status integer,               -- COMPLETED: the stored response
    response_header jsonb,
    response_body   bytea
);

CREATE INDEX sqsonce_idempotency_expires_at ON sqsonce_idempotency (expires_at);
