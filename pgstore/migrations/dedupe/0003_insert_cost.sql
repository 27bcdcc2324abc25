-- What each dedupe row written costs the server, brought down to what
-- the textbook processed_messages row costs: an entry in the primary key.
--
-- Prune's index on expires_at becomes a BRIN index instead of a btree. The
-- btree cost every row an index entry, all of them on its rightmost leaf
-- page (expires_at grows with time), and a WAL record. A BRIN index's
-- insert into a block range not yet summarized writes nothing, and
-- Prune's scan reads the ranges that may hold expired rows (rechecking
-- each row), or the table from its start until it has its batch.
-- minmax_multi keeps a range narrow when pruned space is reused by new
-- rows (PostgreSQL 14 or later).
--
-- The CHECK on status goes: PostgreSQL reads and prepares a table's CHECK
-- expressions again for every INSERT statement, which cost a single-row
-- INSERT about as much as the btree did. The store writes only
-- 'IN_PROGRESS' and 'COMPLETED'.
--
-- On a large table in use, build the BRIN index by hand first, with
-- CREATE INDEX CONCURRENTLY IF NOT EXISTS ... and DROP INDEX CONCURRENTLY
-- IF EXISTS sqsonce_dedupe_expires_at (the dedupepg package documentation
-- gives them), so that writes do not wait for the build; the index
-- statements below then do nothing.
DROP INDEX IF EXISTS sqsonce_dedupe_expires_at;
CREATE INDEX IF NOT EXISTS sqsonce_dedupe_expires_at_brin ON sqsonce_dedupe
    USING brin (expires_at timestamptz_minmax_multi_ops);
ALTER TABLE sqsonce_dedupe DROP CONSTRAINT IF EXISTS sqsonce_dedupe_status_check;
