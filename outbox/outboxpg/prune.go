package outboxpg

import (
	"cmp"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PruneEntities deletes the sequence rows of entities that have no event
// left, at most batch (default 1000) per call, and returns how many. The
// table keeps one row per entity ever written otherwise. It is safe while
// writers and relays run: the rows are locked first (skipping those a
// writer holds), and only then, in a statement that sees every committed
// event, deleted when their entity still has none; a writer arriving
// meanwhile waits and then starts the entity's sequence afresh. Schedule
// it like dedupe's Prune, for example hourly.
func (st *Store) PruneEntities(ctx context.Context, batch int) (int, error) {
	batch = cmp.Or(batch, 1000)
	var n int
	err := pgx.BeginFunc(ctx, st.cfg.DB, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT entity_key FROM `+tableEntities+` e
			WHERE NOT EXISTS (SELECT 1 FROM `+tableEvents+` o WHERE o.entity_key = e.entity_key)
			LIMIT $1 FOR UPDATE SKIP LOCKED`, batch)
		if err != nil {
			return err
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(keys) == 0 {
			return err
		}
		// A new statement, a new snapshot: an event committed after the
		// first one's snapshot keeps its entity.
		tag, err := tx.Exec(ctx, `DELETE FROM `+tableEntities+` e WHERE e.entity_key = ANY($1)
			AND NOT EXISTS (SELECT 1 FROM `+tableEvents+` o WHERE o.entity_key = e.entity_key)`, keys)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("outboxpg: prune entities: %w", err)
	}
	return n, nil
}
