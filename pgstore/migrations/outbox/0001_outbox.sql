-- Each entity's last assigned sequence number. A writer bumps it in its own
-- transaction (INSERT ... ON CONFLICT DO UPDATE), which locks the row until
-- commit: writers of one entity are serialised, so seq follows commit order.
CREATE TABLE sqsonce_outbox_entities (
    entity_key text   PRIMARY KEY,  -- the entity (sha256 past 1000 bytes)
    seq        bigint NOT NULL
);

-- Pending events: deleted once published, kept (dead) when parked.
CREATE TABLE sqsonce_outbox (
    entity_key text        NOT NULL,
    seq        bigint      NOT NULL,
    id         text        NOT NULL,  -- sqsonce-id of the message
    entity     text        NOT NULL,  -- FIFO MessageGroupId
    partition  integer     NOT NULL,  -- outbox.Partition(entity, partitions)
    type       text        NOT NULL DEFAULT '',
    payload    text        NOT NULL,
    created_at timestamptz NOT NULL,
    attempts   integer     NOT NULL DEFAULT 0,
    last_error text        NOT NULL DEFAULT '',
    next_at    timestamptz,           -- after a failed send: not before
    dead       boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (entity_key, seq)
);

-- The relay's read: each entity's oldest event, per partition.
CREATE INDEX sqsonce_outbox_partition ON sqsonce_outbox (partition, entity_key, seq);
-- Stats and Requeue of parked events.
CREATE INDEX sqsonce_outbox_dead ON sqsonce_outbox (created_at) WHERE dead;

-- Partition leases held by relays.
CREATE TABLE sqsonce_outbox_leases (
    partition integer     PRIMARY KEY,
    owner     text        NOT NULL,
    until     timestamptz NOT NULL
);

-- Live relays, to share the partitions.
CREATE TABLE sqsonce_outbox_relays (
    owner text        PRIMARY KEY,
    until timestamptz NOT NULL
);
