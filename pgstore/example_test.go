package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqsonce/sqsonce/pgstore"
)

// One call creates the tables of the stores an application uses (here the
// dedupe store and the outbox), in the schema the pool points at; the
// second finds nothing to do.
func ExampleMigrate() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	schema := fmt.Sprintf("example_%x", rand.Uint64()) // the example's own tables
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		panic(err)
	}
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE") //nolint:errcheck

	applied, err := pgstore.Migrate(ctx, pool, pgstore.Dedupe, pgstore.Outbox)
	if err != nil {
		panic(err)
	}
	fmt.Println("applied:", applied)
	applied, err = pgstore.Migrate(ctx, pool, pgstore.Dedupe, pgstore.Outbox)
	if err != nil {
		panic(err)
	}
	fmt.Println("again:", applied)
	// Output:
	// applied: map[dedupe:[1 2 3 4] outbox:[1 2 3 4]]
	// again: map[]
}
