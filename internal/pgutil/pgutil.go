// Package pgutil holds what sqsonce's PostgreSQL stores share: the
// migration runner and the classification of transient errors.
package pgutil

import (
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

// Beginner starts transactions; *pgxpool.Pool, *pgx.Conn and pgx.Tx have it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// MigrationsTable records the applied migrations of every component.
const MigrationsTable = "sqsonce_schema_migrations"

// Migrate applies component's migrations from fsys (files "NNNN_name.sql"
// at its root, applied in order of NNNN) that the version table does not
// list yet, all in one transaction: either every pending migration is
// applied and recorded, or none. Concurrent calls on one schema serialise
// on an advisory lock, so it is safe to run from several deploy steps. It
// returns the versions applied.
func Migrate(ctx context.Context, db Beginner, component string, fsys fs.FS) ([]int, error) {
	type migration struct {
		version int
		name    string
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("%s: migrate: %w", component, err)
	}
	var ms []migration
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: migrate: %s: name must start with a positive version number", component, e.Name())
		}
		ms = append(ms, migration{v, e.Name()})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })

	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: migrate: begin: %w", component, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	// One lock per schema: the version table is created under it too.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sqsonce-migrate:' || current_schema()))`); err != nil {
		return nil, fmt.Errorf("%s: migrate: lock: %w", component, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+MigrationsTable+` (
		component  text        NOT NULL,
		version    integer     NOT NULL,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (component, version))`); err != nil {
		return nil, fmt.Errorf("%s: migrate: create %s: %w", component, MigrationsTable, err)
	}
	applied := map[int]bool{}
	rows, err := tx.Query(ctx, `SELECT version FROM `+MigrationsTable+` WHERE component = $1`, component)
	if err != nil {
		return nil, fmt.Errorf("%s: migrate: read versions: %w", component, err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("%s: migrate: read versions: %w", component, err)
	}
	for _, v := range versions {
		applied[int(v)] = true
	}
	var done []int
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		sql, err := fs.ReadFile(fsys, m.name)
		if err != nil {
			return nil, fmt.Errorf("%s: migrate: %w", component, err)
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			return nil, fmt.Errorf("%s: migrate: %s: %w", component, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+MigrationsTable+` (component, version, name) VALUES ($1, $2, $3)`,
			component, m.version, m.name); err != nil {
			return nil, fmt.Errorf("%s: migrate: record %s: %w", component, m.name, err)
		}
		done = append(done, m.version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("%s: migrate: commit: %w", component, err)
	}
	return done, nil
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
