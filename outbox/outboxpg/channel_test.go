package outboxpg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/outbox"
	"github.com/sqsonce/sqsonce/outbox/outboxpg"
	"github.com/sqsonce/sqsonce/pgstore"
)

// wakes reports whether a commit through writer wakes a Listener of
// listener. After the writer's commit, a marker commit through listener
// itself: notifications reach a connection in commit order, so once the
// marker has woken the Listener, the writer's notification, if it was
// heard, is already there and wakes the next Wait at once; if it was not,
// that Wait times out.
func wakes(t *testing.T, lpool *pgxpool.Pool, listener *outboxpg.Store, wpool *pgxpool.Pool, writer *outboxpg.Store) bool {
	t.Helper()
	ctx := context.Background()
	l := listener.Listener(lpool)
	defer l.Close(ctx) //nolint:errcheck
	if woke, err := l.Wait(ctx, time.Minute); err != nil || !woke {
		t.Fatalf("the Wait that connects: woke=%v err=%v, want woken at once", woke, err)
	}
	if err := commit(ctx, wpool, writer, outbox.Event{Entity: "a", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := commit(ctx, lpool, listener, outbox.Event{Entity: "marker", Payload: "m"}); err != nil {
		t.Fatal(err)
	}
	if woke, err := l.Wait(ctx, time.Minute); err != nil || !woke {
		t.Fatalf("a commit in the Listener's own outbox: woke=%v err=%v, want woken", woke, err)
	}
	woke, err := l.Wait(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return woke
}

// nopDB is a DB for New's checks, which make no call.
type nopDB struct{ pgstore.DB }

// Two outboxes in two schemas of one database do not wake each other's
// relays with the default channel: it is named after the schema-qualified
// table. A commit still wakes its own schema's relay, and an explicit
// Config.Channel shared by both still wins.
func TestDefaultChannelIsPerSchema(t *testing.T) {
	t.Parallel()
	poolA, poolB := newPool(t), newPool(t)
	a, b := newStore(t, poolA, outboxpg.Config{}), newStore(t, poolB, outboxpg.Config{})
	if wakes(t, poolA, a, poolB, b) {
		t.Errorf("a commit in another schema woke the relay (both on the default channel)")
	}
	if !wakes(t, poolA, a, poolA, a) {
		t.Errorf("a commit in the relay's own schema did not wake it")
	}
	shared := "outbox_shared_" + strings.ReplaceAll(testenv.Name("c")[2:], "-", "_")
	a, b = newStore(t, poolA, outboxpg.Config{Channel: shared}), newStore(t, poolB, outboxpg.Config{Channel: shared})
	if !wakes(t, poolA, a, poolB, b) {
		t.Errorf("an explicit channel shared by two schemas: a commit in one did not wake the other's relay")
	}
}

// A schema whose qualified table name is longer than a PostgreSQL
// identifier (63 bytes) still gets a channel of its own: a hash, not the
// name cut short (LISTEN would truncate it, pg_notify would refuse it).
func TestDefaultChannelLongSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newPool(t)
	long := func(suffix string) *pgxpool.Pool {
		// 63 bytes, differing in the last: truncated, both would be one.
		schema := strings.ReplaceAll(testenv.Name("long"), "-", "_")
		schema += strings.Repeat("x", 62-len(schema)) + suffix
		if _, err := base.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := base.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				t.Error(err)
			}
		})
		cfg := base.Config()
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if _, err := pgstore.Migrate(ctx, pool, pgstore.Outbox); err != nil {
			t.Fatal(err)
		}
		return pool
	}
	poolA, poolB := long("a"), long("b")
	a, b := newStore(t, poolA, outboxpg.Config{}), newStore(t, poolB, outboxpg.Config{})
	if wakes(t, poolA, a, poolB, b) {
		t.Errorf("a commit in another long-named schema woke the relay")
	}
	if !wakes(t, poolA, a, poolA, a) {
		t.Errorf("a commit in the relay's own long-named schema did not wake it")
	}
}

// A channel longer than PostgreSQL's 63-byte names is refused at New: LISTEN
// would truncate it and never hear Put's NOTIFY.
func TestChannelTooLong(t *testing.T) {
	t.Parallel()
	_, err := outboxpg.New(outboxpg.Config{DB: nopDB{}, Channel: strings.Repeat("c", 64)})
	if err == nil || !strings.Contains(err.Error(), "Channel") {
		t.Fatalf("New with a 64-byte channel: %v, want an error naming Channel", err)
	}
}
