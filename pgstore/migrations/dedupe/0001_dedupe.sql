-- One row per message key (see the package documentation).
CREATE TABLE sqsonce_dedupe (
    pk          text        PRIMARY KEY,  -- "<namespace>#<key>", hashed past 2048 bytes (dedupe.PK)
    status      text        NOT NULL CHECK (status IN ('IN_PROGRESS', 'COMPLETED')),
    token       text        NOT NULL,     -- random per claim; fences Extend, Complete and Release
    fingerprint text        NOT NULL,     -- hash of the body; same key + another body = key reuse
    lease_until timestamptz,              -- IN_PROGRESS only: when the claim may be taken over
    expires_at  timestamptz NOT NULL      -- the record is dead after this; Prune deletes it
);

-- Prune's scan.
CREATE INDEX sqsonce_dedupe_expires_at ON sqsonce_dedupe (expires_at);
