-- Prune's index on expires_at as a BRIN index instead of a btree. The
-- btree cost every dedupe row written an index entry, all of them on its
-- rightmost leaf page (expires_at grows with time), and a WAL record: a
-- message in Transactional paid two index inserts where the textbook
-- processed_messages row pays one. A BRIN index's insert into a block
-- range not yet summarized writes nothing, and Prune's scan reads the
-- ranges that may hold expired rows (rechecking each row), or the table
-- from its start until it has its batch. minmax_multi keeps a range
-- narrow when pruned space is reused by new rows (PostgreSQL 14 or later).
--
-- On a large table in use, run the two statements by hand first, with
-- CONCURRENTLY (CREATE INDEX CONCURRENTLY IF NOT EXISTS ..., then DROP
-- INDEX CONCURRENTLY IF EXISTS sqsonce_dedupe_expires_at), so that
-- writes do not wait for the build: these then do nothing.
DROP INDEX IF EXISTS sqsonce_dedupe_expires_at;
CREATE INDEX IF NOT EXISTS sqsonce_dedupe_expires_at_brin ON sqsonce_dedupe
    USING brin (expires_at timestamptz_minmax_multi_ops);
