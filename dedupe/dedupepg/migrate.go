package dedupepg

import (
	"context"
	"embed"
	"io/fs"

	"github.com/sqsonce/sqsonce/internal/pgutil"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Table is the dedupe table the migrations create.
const Table = "sqsonce_dedupe"

// Migrate creates or upgrades the dedupe table in the connection's current
// schema (its search_path). It applies the pending migrations of
// migrations/*.sql in one transaction, records them in
// sqsonce_schema_migrations (component "dedupe"), and does nothing when all
// are applied: run it from a deploy step or a setup command, never
// implicitly at a worker's start-up. It returns the versions applied.
func Migrate(ctx context.Context, db pgutil.Beginner) ([]int, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	return pgutil.Migrate(ctx, db, "dedupe", sub)
}
