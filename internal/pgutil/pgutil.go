// Package pgutil holds what sqsonce's PostgreSQL stores share inside: the
// migration runner, the fenced write of a lease record, and the
// classification of transient errors. Their shared API is package
// pgstore's.
package pgutil

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TxBeginner starts transactions; *pgxpool.Pool and *pgx.Conn have it.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// MigrationsTable records the applied migrations of every component.
const MigrationsTable = "sqsonce_schema_migrations"

// Component is one set of migrations: files "NNNN_name.sql" at the root of
// FS, applied in order of NNNN and recorded under Name.
type Component struct {
	Name string
	FS   fs.FS
}

// migration is one file of a component.
type migration struct {
	version int
	name    string
}

// migrations lists c's migrations in order.
func (c Component) migrations() ([]migration, error) {
	entries, err := fs.ReadDir(c.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: %s: name must start with a positive version number", c.Name, e.Name())
		}
		ms = append(ms, migration{v, e.Name()})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// Migrate applies the migrations of every component that the version table
// does not list yet, all in one transaction: either every pending
// migration is applied and recorded, or none. Concurrent calls on one
// schema serialise on an advisory lock, so it is safe to run from several
// deploy steps. It returns the versions applied, by component name; a
// component with none applied is absent. Errors start with prefix.
func Migrate(ctx context.Context, db TxBeginner, prefix string, components ...Component) (map[string][]int, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: migrate: begin: %w", prefix, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	// One lock per schema: the version table is created under it too.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sqsonce-migrate:' || current_schema()))`); err != nil {
		return nil, fmt.Errorf("%s: migrate: lock: %w", prefix, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+MigrationsTable+` (
		component  text        NOT NULL,
		version    integer     NOT NULL,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (component, version))`); err != nil {
		return nil, fmt.Errorf("%s: migrate: create %s: %w", prefix, MigrationsTable, err)
	}
	done := map[string][]int{}
	for _, c := range components {
		applied, err := apply(ctx, tx, c)
		if err != nil {
			return nil, fmt.Errorf("%s: migrate: %w", prefix, err)
		}
		if len(applied) > 0 {
			done[c.Name] = append(done[c.Name], applied...)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("%s: migrate: commit: %w", prefix, err)
	}
	return done, nil
}

// apply applies in tx the migrations of c that the version table does not
// list, and returns their versions.
func apply(ctx context.Context, tx pgx.Tx, c Component) ([]int, error) {
	ms, err := c.migrations()
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT version FROM `+MigrationsTable+` WHERE component = $1`, c.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: read versions: %w", c.Name, err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("%s: read versions: %w", c.Name, err)
	}
	applied := map[int]bool{}
	for _, v := range versions {
		applied[int(v)] = true
	}
	var done []int
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		sql, err := fs.ReadFile(c.FS, m.name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", c.Name, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+MigrationsTable+` (component, version, name) VALUES ($1, $2, $3)`,
			c.Name, m.version, m.name); err != nil {
			return nil, fmt.Errorf("%s: record %s: %w", c.Name, m.name, err)
		}
		done = append(done, m.version)
	}
	return done, nil
}

// Fenced turns the result of a statement fenced by a claim's token (an
// UPDATE or DELETE ... WHERE token = $n AND status = 'IN_PROGRESS') into
// the store's error: err wrapped, or notOwner when no row matched (the
// claim was lost). Errors start with "prefix: op: ".
func Fenced(prefix, op string, tag pgconn.CommandTag, err, notOwner error) error {
	if err != nil {
		return fmt.Errorf("%s: %s: %w", prefix, op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %s: %w", prefix, op, notOwner)
	}
	return nil
}

// SQLSTATE codes that are worth retrying.
const (
	CodeSerializationFailure = "40001"
	CodeDeadlockDetected     = "40P01"
	CodeAdminShutdown        = "57P01" // pg_terminate_backend, a fast shutdown
	CodeCrashShutdown        = "57P02"
	CodeCannotConnectNow     = "57P03" // starting up or in recovery
	CodeLockNotAvailable     = "55P03"
)

// Transient reports whether err is worth retrying in a new transaction: a
// serialization failure, a deadlock, a lock timeout, the connection lost or
// the backend terminated, the server starting up or shutting down. A
// constraint violation, a syntax error or a context's end are not.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case CodeSerializationFailure, CodeDeadlockDetected, CodeAdminShutdown, CodeCrashShutdown,
			CodeCannotConnectNow, CodeLockNotAvailable:
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection exception
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	// ErrConnClosed: the connection died earlier in the transaction;
	// SafeToRetry marks errors raised before anything was sent.
	return errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err)
}

// Prune runs step, which deletes up to batch rows in one short
// transaction and returns how many, until a step deletes fewer than batch
// or maxBatches ran; it returns how many rows the steps deleted. batch
// and maxBatches default to 1000 and 100.
func Prune(ctx context.Context, batch, maxBatches int, step func(ctx context.Context, batch int) (int, error)) (int, error) {
	batch, maxBatches = cmp.Or(batch, 1000), cmp.Or(maxBatches, 100)
	total := 0
	for range maxBatches {
		n, err := step(ctx, batch)
		total += n
		if err != nil {
			return total, err
		}
		if n < batch {
			break
		}
	}
	return total, nil
}

// Querier runs a query that returns one row; a pool, a connection and a
// pgx.Tx have it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CheckTables verifies that every table exists in the connection's
// search_path and is readable, with an error that says what to run:
// migrate names the pgstore.Migrate call that creates them. Errors start
// with prefix.
func CheckTables(ctx context.Context, db Querier, prefix, migrate string, tables ...string) error {
	for _, table := range tables {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+table+` LIMIT 1) t`).Scan(&n)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return fmt.Errorf("%s: table %s does not exist in the connection's search_path: run %s first: %w", prefix, table, migrate, err)
		}
		if err != nil {
			return fmt.Errorf("%s: check %s: %w", prefix, table, err)
		}
	}
	return nil
}
