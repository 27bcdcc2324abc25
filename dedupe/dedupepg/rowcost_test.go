package dedupepg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/consumer"
	"github.com/sqsonce/sqsonce/consumer/consumertest"
	"github.com/sqsonce/sqsonce/dedupe"
	"github.com/sqsonce/sqsonce/dedupe/dedupepg"
	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

// walRecords is the number of WAL records sql writes, from EXPLAIN
// (ANALYZE, WAL) in a transaction rolled back.
func walRecords(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, WAL, FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	var plans []struct {
		Plan struct {
			WALRecords int `json:"WAL Records"`
		}
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", raw, err)
	}
	return plans[0].Plan.WALRecords
}

// TestTransactionalRowIndexes: the dedupe row a message's transaction
// inserts is entered in one index, the primary key, as the textbook
// processed_messages row is: Prune's index on expires_at is a BRIN
// index, whose insert writes nothing, and the index of unknown steps is
// partial (a COMPLETED row holds none). Counted from the catalog and
// from the WAL records of the row's INSERT against the textbook's. The
// table has no CHECK constraint either: PostgreSQL reads and prepares a
// table's CHECK expressions again for every INSERT statement, which cost
// the single-row INSERT about as much as the btree did; the store writes
// only its two statuses. The row is written to a block range the BRIN
// index has not summarized (building the index on the new table
// summarized block 0, and every INSERT there rewrote the summary).
func TestTransactionalRowIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, schema := testenv.PostgresSchema(t)
	if _, err := pgstore.Migrate(ctx, base, pgstore.Dedupe); err != nil {
		t.Fatal(err)
	}
	if _, err := base.Exec(ctx, `CREATE TABLE processed_messages (message_id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO processed_messages VALUES ('m-1')`); err != nil {
		t.Fatal(err)
	}
	rows, err := base.Query(ctx, `SELECT c.relname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE i.indrelid = 'sqsonce_dedupe'::regclass AND i.indpred IS NULL AND a.amname <> 'brin'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	every, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(every, []string{"sqsonce_dedupe_pkey"}) {
		t.Fatalf("indexes every dedupe row is entered in: %v, want only the primary key", every)
	}
	var checks []string
	rows, err = base.Query(ctx, `SELECT conname FROM pg_constraint WHERE conrelid = 'sqsonce_dedupe'::regclass AND contype = 'c' ORDER BY 1`)
	if err == nil {
		checks, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(checks) > 0 {
		t.Fatalf("CHECK constraints on the dedupe table: %v %v, want none (each INSERT would rebuild and evaluate them)", checks, err)
	}

	s, trace := tracedStore(t, base, schema, "rc")
	h := dedupepg.Transactional(s, func(context.Context, pgx.Tx, *consumer.Message) error { return nil }, nil)
	if err := h.Handle(ctx, consumertest.NewMessage("x", consumertest.WithID("m-1"))); err != nil {
		t.Fatal(err)
	}
	var insert *pgx.TraceQueryStartData
	for _, q := range trace.take() {
		if strings.HasPrefix(q.SQL, "INSERT") {
			insert = &q
		}
	}
	if insert == nil || len(insert.Args) == 0 {
		t.Fatal("no dedupe INSERT traced")
	}
	args := slices.Clone(insert.Args)
	args[0] = s.PK("m-2") // a new key: the INSERT writes a row
	// expiring after every row written before, as the next message's row
	// does: a BRIN summary of its block range would have to grow.
	args[2] = time.Now().Add(dedupe.DefaultTTL + time.Hour)
	got := walRecords(t, base, insert.SQL, args...)
	textbook := walRecords(t, base, `INSERT INTO processed_messages (message_id) VALUES ($1) ON CONFLICT DO NOTHING`, "m-2")
	if got > textbook {
		t.Fatalf("the dedupe row's INSERT writes %d WAL records, the textbook row's %d: want no more", got, textbook)
	}
}

// TestDedupeTableIndexes: the dedupe table has the primary key and one
// other index, a BRIN index serving both Prune (expires_at) and
// Store.Unknown (unknown_step IS NOT NULL). PostgreSQL opens, locks and
// prepares every index of a table for each INSERT, also a partial index
// the row is not entered in: the partial btree on unknown_step cost the
// textbook-shaped INSERT about 1 µs of backend CPU, which a second column
// of the BRIN index does not.
func TestDedupeTableIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	rows, err := pool.Query(ctx, `SELECT c.relname || ' ' || a.amname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE i.indrelid = 'sqsonce_dedupe'::regclass ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sqsonce_dedupe_brin brin", "sqsonce_dedupe_pkey btree"}
	if !slices.Equal(idx, want) {
		t.Fatalf("indexes of the dedupe table (each opened by every INSERT): %q, want %q", idx, want)
	}
}

// TestMigrateReplacesTheExpiresAtBtree: a table created before the BRIN
// index (the btree on expires_at, the partial btree on unknown_step and
// the CHECK on status, migrations 1 and 2) is upgraded by Migrate to the
// one BRIN index without the CHECK, and its rows stay claimable,
// prunable and listed by Unknown.
func TestMigrateReplacesTheExpiresAtBtree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	// The schema as migrations 1 and 2 left it, with a live, an expired
	// row and one holding a step of unknown outcome.
	if _, err := pool.Exec(ctx, `DROP INDEX sqsonce_dedupe_brin;
		CREATE INDEX sqsonce_dedupe_expires_at ON sqsonce_dedupe (expires_at);
		CREATE INDEX sqsonce_dedupe_unknown_step ON sqsonce_dedupe (pk) WHERE unknown_step IS NOT NULL;
		ALTER TABLE sqsonce_dedupe ADD CHECK (status IN ('IN_PROGRESS', 'COMPLETED'));
		DELETE FROM sqsonce_schema_migrations WHERE component = 'dedupe' AND version IN (3, 4);
		INSERT INTO sqsonce_dedupe (pk, status, token, fingerprint, lease_until, expires_at, steps, unknown_step) VALUES
			('up#live', 'COMPLETED', 't1', '', NULL, now() + interval '1 day', NULL, NULL),
			('up#gone', 'COMPLETED', 't2', '', NULL, now() - interval '1 day', NULL, NULL),
			('up#unk', 'IN_PROGRESS', 't3', '', now() - interval '1 hour', now() + interval '1 day',
				'{"charge": {"status": "unknown", "reason": "timeout", "at": "2026-01-01T00:00:00Z"}}', 'charge')`); err != nil {
		t.Fatal(err)
	}
	v, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe)
	if err != nil || fmt.Sprint(v[pgstore.Dedupe]) != "[3 4]" {
		t.Fatalf("Migrate on a version 2 table: %v %v, want [3 4] applied", v, err)
	}
	var idx []string
	rows, err := pool.Query(ctx, `SELECT c.relname || ' ' || a.amname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE i.indrelid = 'sqsonce_dedupe'::regclass ORDER BY 1`)
	if err == nil {
		idx, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	want := []string{"sqsonce_dedupe_brin brin", "sqsonce_dedupe_pkey btree"}
	if err != nil || !slices.Equal(idx, want) {
		t.Fatalf("indexes after the upgrade: %q %v, want %q", idx, err, want)
	}
	var checks int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE conrelid = 'sqsonce_dedupe'::regclass AND contype = 'c'`).Scan(&checks); err != nil || checks != 0 {
		t.Fatalf("CHECK constraints after the upgrade: %d %v, want none", checks, err)
	}
	s, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: "up"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, pgstore.PruneOptions{}); err != nil || n != 1 {
		t.Fatalf("Prune after the upgrade: %d %v, want the expired row", n, err)
	}
	c, err := s.Claim(ctx, "live", "", time.Minute)
	if err != nil || c.Status != dedupe.Duplicate {
		t.Fatalf("Claim of the row written before the upgrade: %+v %v, want a duplicate", c, err)
	}
	list, err := s.Unknown(ctx, 0)
	if err != nil || len(list) != 1 || list[0].Key != "unk" || list[0].Step != "charge" || list[0].Held {
		t.Fatalf("Unknown after the upgrade: %+v %v, want the step charge of unk, not held", list, err)
	}
}

// TestTransactionalRowHasNoToken: the COMPLETED row Transactional writes
// without a claim carries no token (nothing fences on a completed row's
// token), so the INSERT sends three parameters (DO NOTHING needs no now
// either) and the row is that much narrower, and no random token is drawn
// per message.
func TestTransactionalRowHasNoToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, schema := testenv.PostgresSchema(t)
	if _, err := pgstore.Migrate(ctx, base, pgstore.Dedupe); err != nil {
		t.Fatal(err)
	}
	s, trace := tracedStore(t, base, schema, "nt")
	h := dedupepg.Transactional(s, func(context.Context, pgx.Tx, *consumer.Message) error { return nil }, nil)
	if err := h.Handle(ctx, consumertest.NewMessage("x", consumertest.WithID("m-1"))); err != nil {
		t.Fatal(err)
	}
	for _, q := range trace.take() {
		if strings.HasPrefix(q.SQL, "INSERT") && len(q.Args) != 3 {
			t.Errorf("the dedupe INSERT sends %d parameters, want 3 (key, fingerprint, expiry)", len(q.Args))
		}
	}
	var token string
	if err := base.QueryRow(ctx, `SELECT token FROM sqsonce_dedupe WHERE pk = $1`, s.PK("m-1")).Scan(&token); err != nil || token != "" {
		t.Fatalf("the completed row's token: %q %v, want none", token, err)
	}
}

// TestTransactionalRowInsertDoesNothingOnConflict: the INSERT of a new
// message's dedupe row resolves a conflict as the textbook's does, ON
// CONFLICT DO NOTHING, which PostgreSQL executes with less work than DO
// UPDATE (no projection or quals of an update prepared per INSERT). The
// rare answers (a live row, or a dead one to take over) are the job of the
// statements that follow only when no row was written
// (TestTransactionalRareStatements). Read from the plan of the INSERT
// traced.
func TestTransactionalRowInsertDoesNothingOnConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, schema := testenv.PostgresSchema(t)
	if _, err := pgstore.Migrate(ctx, base, pgstore.Dedupe); err != nil {
		t.Fatal(err)
	}
	s, trace := tracedStore(t, base, schema, "dn")
	h := dedupepg.Transactional(s, func(context.Context, pgx.Tx, *consumer.Message) error { return nil }, nil)
	if err := h.Handle(ctx, consumertest.NewMessage("x", consumertest.WithID("m-1"))); err != nil {
		t.Fatal(err)
	}
	var inserts []pgx.TraceQueryStartData
	for _, q := range trace.take() {
		if strings.HasPrefix(q.SQL, "INSERT") {
			inserts = append(inserts, q)
		}
	}
	if len(inserts) != 1 {
		t.Fatalf("%d dedupe INSERTs for a new message, want 1", len(inserts))
	}
	args := slices.Clone(inserts[0].Args)
	args[0] = s.PK("m-2")
	var raw []byte
	if err := base.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+inserts[0].SQL, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan struct {
			Resolution string `json:"Conflict Resolution"`
		}
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", raw, err)
	}
	if got := plans[0].Plan.Resolution; got != "NOTHING" {
		t.Fatalf("the dedupe row's INSERT resolves a conflict with %s, want NOTHING as the textbook's", got)
	}
}
