package outboxpg

import (
	"context"
	"embed"
	"io/fs"

	"github.com/sqsonce/sqsonce/internal/pgutil"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Tables the migrations create.
const (
	tableEvents   = "sqsonce_outbox"
	tableEntities = "sqsonce_outbox_entities"
	tableLeases   = "sqsonce_outbox_leases"
	tableRelays   = "sqsonce_outbox_relays"
)

// Migrate creates or upgrades the outbox tables in the connection's
// current schema (its search_path): the pending migrations of
// migrations/*.sql in one transaction, recorded in
// sqsonce_schema_migrations (component "outbox"). It does nothing when all
// are applied. Run it from a deploy step or a setup command, never
// implicitly at start-up. It returns the versions applied.
func Migrate(ctx context.Context, db pgutil.Beginner) ([]int, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	return pgutil.Migrate(ctx, db, "outbox", sub)
}
