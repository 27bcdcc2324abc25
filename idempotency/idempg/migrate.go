package idempg

import (
	"context"
	"embed"
	"io/fs"

	"github.com/sqsonce/sqsonce/internal/pgutil"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Table is the table the migrations create.
const Table = "sqsonce_idempotency"

// Migrate creates or upgrades the idempotency table in the connection's
// current schema: the pending migrations of migrations/*.sql in one
// transaction, recorded in sqsonce_schema_migrations (component
// "idempotency"). Run it from a deploy step or a setup command, never
// implicitly at start-up. It returns the versions applied.
func Migrate(ctx context.Context, db pgutil.Beginner) ([]int, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	return pgutil.Migrate(ctx, db, "idempotency", sub)
}
