-- One index besides the primary key: a BRIN index on expires_at (Prune's
-- scan, as migration 3 made it) and unknown_step (Store.Unknown), instead
-- of that BRIN index and a partial btree on unknown_step.
--
-- PostgreSQL opens, locks and prepares every index of a table for each
-- INSERT, a partial index whose predicate the row fails too: the partial
-- btree cost every dedupe row's INSERT about as much as a second BRIN
-- index would, though almost no row is ever entered in it. A column of a
-- BRIN index whose block range is not yet summarized costs an INSERT
-- nothing more. A summarized range records whether all of its
-- unknown_step values are NULL, so Unknown's scan (unknown_step IS NOT
-- NULL) reads only the ranges that hold, or once held, a step of unknown
-- outcome, and the ones not yet summarized.
--
-- On a large table in use, build the index by hand first, with CREATE
-- INDEX CONCURRENTLY IF NOT EXISTS ... and DROP INDEX CONCURRENTLY IF
-- EXISTS for the two it replaces (the dedupepg package documentation
-- gives them), so that writes do not wait for the build; the statements
-- below then do nothing.
CREATE INDEX IF NOT EXISTS sqsonce_dedupe_brin ON sqsonce_dedupe
    USING brin (expires_at timestamptz_minmax_multi_ops, unknown_step);
DROP INDEX IF EXISTS sqsonce_dedupe_expires_at_brin;
DROP INDEX IF EXISTS sqsonce_dedupe_unknown_step;

-- Building a BRIN index summarizes the table's last block range too (on
-- a new, empty table: block 0), and an INSERT into a summarized range
-- rewrites its summary (a WAL record, every new row, until the range is
-- full). Unsummarized, the range costs an INSERT nothing; VACUUM
-- summarizes it once it is full, and until then Prune and Unknown read
-- it whole.
SELECT brin_desummarize_range('sqsonce_dedupe_brin',
    pg_relation_size('sqsonce_dedupe') / current_setting('block_size')::bigint / 128 * 128);
