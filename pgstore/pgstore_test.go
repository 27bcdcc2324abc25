package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqsonce/sqsonce/internal/testenv"
	"github.com/sqsonce/sqsonce/pgstore"
)

// TestMigrateIsIdempotent: concurrent first runs serialise: one applies,
// the others find it done.
func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t)
	var wg sync.WaitGroup
	applied := make(chan map[pgstore.Component][]int, 4)
	for range 4 {
		wg.Go(func() {
			v, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe)
			if err != nil {
				t.Errorf("Migrate: %v", err)
			}
			applied <- v
		})
	}
	wg.Wait()
	close(applied)
	runs := 0
	for v := range applied {
		if len(v) > 0 {
			runs++
			if fmt.Sprint(v[pgstore.Dedupe]) != "[1 2 3 4]" {
				t.Errorf("applied %v, want [1 2 3 4]", v)
			}
		}
	}
	if runs != 1 {
		t.Fatalf("%d runs applied migrations, want 1", runs)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sqsonce_schema_migrations WHERE component = 'dedupe'`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("version rows: %d %v", n, err)
	}
}

// TestMigrateEveryComponent: one call creates the tables of every
// component named, records each under its own name, and a later call
// adding a component applies only that one's.
func TestMigrateEveryComponent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t)
	v, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe, pgstore.Outbox)
	if err != nil || fmt.Sprint(v[pgstore.Dedupe], v[pgstore.Outbox]) != "[1 2 3 4] [1 2 3 4]" || len(v) != 2 {
		t.Fatalf("Migrate(Dedupe, Outbox): %v %v", v, err)
	}
	v, err = pgstore.Migrate(ctx, pool, pgstore.Dedupe, pgstore.Outbox, pgstore.Idempotency)
	if err != nil || fmt.Sprint(v) != fmt.Sprint(map[pgstore.Component][]int{pgstore.Idempotency: {1, 2}}) {
		t.Fatalf("Migrate(Dedupe, Outbox, Idempotency) after the first two: %v %v, want idempotency's only", v, err)
	}
	for _, table := range []string{"sqsonce_dedupe", "sqsonce_idempotency", "sqsonce_outbox", "sqsonce_outbox_entities", "sqsonce_outbox_leases", "sqsonce_outbox_relays"} {
		var found bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&found); err != nil || !found {
			t.Errorf("table %s: found %v (%v)", table, found, err)
		}
	}
	var names []string
	rows, err := pool.Query(ctx, `SELECT DISTINCT component FROM sqsonce_schema_migrations ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		_ = rows.Scan(&c)
		names = append(names, c)
	}
	if fmt.Sprint(names) != "[dedupe idempotency outbox]" {
		t.Fatalf("recorded components %v", names)
	}
}

// TestMigrateNamesWhatToPass: a call without components, or with an
// unknown one, says what to pass and touches nothing.
func TestMigrateNamesWhatToPass(t *testing.T) {
	t.Parallel()
	for _, cs := range [][]pgstore.Component{nil, {pgstore.Component(0)}, {pgstore.Component(42)}} {
		_, err := pgstore.Migrate(context.Background(), nil, cs...)
		if err == nil || !strings.Contains(err.Error(), "pgstore.Dedupe") {
			t.Errorf("Migrate(%v): %v, want an error naming the components", cs, err)
		}
	}
	if pgstore.Outbox.String() != "outbox" || pgstore.Component(9).String() != "Component(9)" {
		t.Errorf("String: %s %s", pgstore.Outbox, pgstore.Component(9))
	}
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "40001"}), true},
		{io.ErrUnexpectedEOF, true},
		{&pgconn.PgError{Code: "23505"}, false}, // unique violation
		{&pgconn.PgError{Code: "42601"}, false}, // syntax error
		{context.Canceled, false},
		{errors.New("bad input"), false},
	} {
		if got := pgstore.IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
