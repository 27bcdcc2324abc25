-- A fleet's rates: one row per rate (see limitpg).
CREATE TABLE sqsonce_limit_rates (
    pk      text   PRIMARY KEY,  -- "rate#<name>", hashed past 2048 bytes
    next_ns bigint NOT NULL      -- the timeline's first slot not leased, ns since the epoch
);

-- Per-key concurrency slots: one row per slot held (or held once and
-- expired: the next holder of that slot takes the row over).
CREATE TABLE sqsonce_limit_slots (
    pk         text        NOT NULL,  -- "slots#<name>#<key>", the key hashed past 2048 bytes or when not UTF-8
    slot       integer     NOT NULL,  -- 0 to the limit - 1
    holder     text        NOT NULL,  -- unique per acquisition
    expires_at timestamptz NOT NULL,  -- the slot is free after this
    PRIMARY KEY (pk, slot)
);

-- Extend and Release find a holder's row.
CREATE INDEX sqsonce_limit_slots_holder ON sqsonce_limit_slots (pk, holder);
