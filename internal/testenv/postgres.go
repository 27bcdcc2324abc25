package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresURL returns DATABASE_URL (written by `localstack/postgres.sh env`),
// failing the test when SQSONCE_INTEGRATION=1 and the server is not set or
// not reachable, and skipping it otherwise.
func PostgresURL(t testing.TB) string {
	t.Helper()
	if os.Getenv("DATABASE_URL") == "" {
		if Required() {
			t.Fatalf("SQSONCE_INTEGRATION=1 but DATABASE_URL is not set: start PostgreSQL with `localstack/postgres.sh up` and source the line `localstack/postgres.sh env` prints")
		}
		t.Skipf("integration test: DATABASE_URL is not set (start PostgreSQL with `localstack/postgres.sh up`)")
	}
	raw := os.Getenv("DATABASE_URL")
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("DATABASE_URL is not a postgres:// URL with a host")
	}
	conn, err := net.DialTimeout("tcp", u.Host, 3*time.Second)
	if err != nil {
		// The URL holds a password: name the host only.
		t.Fatalf("DATABASE_URL's server %s is unreachable: %v (is it running? `localstack/postgres.sh status`)", u.Host, err)
	}
	conn.Close()
	return raw
}

// Postgres returns a pool on a fresh schema of the DATABASE_URL database:
// every connection's search_path is that schema, so unqualified tables are
// the test's own. The schema is dropped and the pool closed at cleanup.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := PostgresSchema(t)
	return pool
}

// PostgresSchema is [Postgres], also returning the schema's name.
func PostgresSchema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("DATABASE_URL: connect: %v (is the server running? `localstack/postgres.sh status`)", err)
	}
	defer admin.Close(context.Background())
	schema := Name("t")
	schema = "test_" + schema[len("t-"):] // a plain identifier
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: connect: %v", schema, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close) // runs before the drop (cleanups run last-in first-out)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return pool, schema
}

// PostgresTerminate ends the server process (backend) with pid, as a crash
// or a failover does to a worker's connection.
func PostgresTerminate(t testing.TB, pid uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, PostgresURL(t))
	if err != nil {
		t.Fatalf("terminate backend: connect: %v", err)
	}
	defer c.Close(context.Background())
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// PostgresRole creates a role (dropped at cleanup) that can do nothing
// until granted, runs grants (with %[1]s for the role's name) on pool's
// schema, and returns a pool on the same schema whose sessions run as that
// role: a test of the privileges a package documents.
func PostgresRole(t testing.TB, pool *pgxpool.Pool, grants ...string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := pool.Config()
	schema := cfg.ConnConfig.RuntimeParams["search_path"]
	role := Name("role")
	role = "role_" + role[len("role-"):]
	if _, err := pool.Exec(ctx, "CREATE ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatalf("create role: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, PostgresURL(t))
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(ctx, "DROP OWNED BY "+role)
		if _, err := c.Exec(ctx, "DROP ROLE "+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	for _, g := range append([]string{"GRANT USAGE ON SCHEMA " + schema + " TO %[1]s"}, grants...) {
		if _, err := pool.Exec(ctx, fmt.Sprintf(g, role)); err != nil {
			t.Fatalf("%s: %v", fmt.Sprintf(g, role), err)
		}
	}
	cfg.ConnConfig.RuntimeParams["role"] = role
	as, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pool as %s: %v", role, err)
	}
	t.Cleanup(as.Close)
	var cur string
	if err := as.QueryRow(ctx, "SELECT current_user").Scan(&cur); err != nil || cur != role {
		t.Fatalf("pool runs as %q (%v), want %s", cur, err, role)
	}
	return as
}
