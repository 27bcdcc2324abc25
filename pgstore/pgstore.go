// Package pgstore is what sqsonce's PostgreSQL stores (dedupepg, idempg,
// outboxpg) share: the database handle they take ([DB]), the one call that
// creates and upgrades their tables ([Migrate]), the options of their
// Prune ([PruneOptions]) and the test for a failure worth another
// transaction ([IsTransient]).
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	...
//	// In a deploy step, once per schema: the tables of the stores used.
//	if _, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe, pgstore.Outbox); err != nil { ... }
//	...
//	store, err := dedupepg.New(dedupepg.Config{DB: pool, Namespace: "orders"})
//
// The tables live in the connection's current schema (its search_path):
// point the pool at a schema of its own to keep them apart.
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqsonce/sqsonce/internal/pgutil"
)

// DB is what the stores need of a connection pool; *pgxpool.Pool has it
// (and *pgx.Conn, for one connection).
type DB interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Component names the tables of one store, for [Migrate].
type Component int

const (
	// Dedupe is dedupepg's table, sqsonce_dedupe.
	Dedupe Component = iota + 1
	// Idempotency is idempg's table, sqsonce_idempotency.
	Idempotency
	// Outbox is outboxpg's tables: sqsonce_outbox,
	// sqsonce_outbox_entities, sqsonce_outbox_leases and
	// sqsonce_outbox_relays.
	Outbox
)

var componentNames = [...]string{Dedupe: "dedupe", Idempotency: "idempotency", Outbox: "outbox"}

// String returns the component's name, as recorded in
// sqsonce_schema_migrations.
func (c Component) String() string {
	if c <= 0 || int(c) >= len(componentNames) {
		return fmt.Sprintf("Component(%d)", int(c))
	}
	return componentNames[c]
}

//go:embed migrations/*/*.sql
var migrations embed.FS

// Migrate creates or upgrades the tables of the components given in the
// connection's current schema (its search_path): their pending migrations
// (the SQL files under migrations/ in this package), all in one
// transaction, recorded in sqsonce_schema_migrations. It does nothing for
// the migrations already applied, and concurrent calls on one schema wait
// for each other, so every deploy step may run it. Run it from a deploy
// step or a setup command with a role that may create tables, never
// implicitly at a worker's start-up. It returns the versions applied, by
// component; a component with none applied is absent.
func Migrate(ctx context.Context, db DB, components ...Component) (map[Component][]int, error) {
	if len(components) == 0 {
		return nil, errors.New("pgstore: Migrate: name the components to migrate: pgstore.Dedupe, pgstore.Idempotency, pgstore.Outbox")
	}
	sets := make([]pgutil.Component, 0, len(components))
	seen := map[Component]bool{}
	for _, c := range components {
		if c <= 0 || int(c) >= len(componentNames) {
			return nil, fmt.Errorf("pgstore: Migrate: unknown component %v: use pgstore.Dedupe, pgstore.Idempotency or pgstore.Outbox", c)
		}
		if seen[c] {
			continue
		}
		seen[c] = true
		sub, err := fs.Sub(migrations, "migrations/"+c.String())
		if err != nil {
			return nil, fmt.Errorf("pgstore: Migrate: %w", err)
		}
		sets = append(sets, pgutil.Component{Name: c.String(), FS: sub})
	}
	done, err := pgutil.Migrate(ctx, db, "pgstore", sets...)
	if err != nil {
		return nil, err
	}
	out := map[Component][]int{}
	for _, c := range components {
		if v := done[c.String()]; len(v) > 0 {
			out[c] = v
		}
	}
	return out, nil
}

// PruneOptions bounds one Prune of a store. PostgreSQL has no TTL: a
// store's Prune deletes what is dead, in batches of BatchSize rows, each
// its own short transaction, until none is left or MaxBatches ran.
type PruneOptions struct {
	// BatchSize is the most rows one DELETE removes. Defaults to 1000.
	BatchSize int
	// MaxBatches is the most DELETEs one call runs. Defaults to 100, so a
	// call removes at most 100,000 rows.
	MaxBatches int
}

// IsTransient reports whether err is a failure a new transaction may not
// meet: a serialization failure (40001), a deadlock (40P01), a lock
// timeout, the connection lost or the backend terminated, the server
// starting up or shutting down. A constraint violation, a syntax error or
// a context's end are not. Errors are classified by SQLSTATE and type,
// never by message.
func IsTransient(err error) bool { return pgutil.Transient(err) }
