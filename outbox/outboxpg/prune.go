package outboxpg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sqsonce/sqsonce/internal/pgutil"
	"github.com/sqsonce/sqsonce/pgstore"
)

// Prune deletes the sequence rows of entities that have no event left, in
// batches of opts.BatchSize rows, each its own transaction, until none is
// left or opts.MaxBatches ran, and returns how many it deleted. The table
// keeps one row per entity ever written otherwise. It is safe while
// writers and relays run: the rows are locked first (skipping those a
// writer holds), and only then, in a statement that sees every committed
// event, deleted when their entity still has none; a writer arriving
// meanwhile waits and then starts the entity's sequence afresh. Schedule
// it like the other stores' Prune, for example hourly.
func (st *Store) Prune(ctx context.Context, opts pgstore.PruneOptions) (int, error) {
	return pgutil.Prune(ctx, opts.BatchSize, opts.MaxBatches, st.pruneBatch)
}

// pruneBatch deletes up to batch drained entities' rows in one
// transaction.
func (st *Store) pruneBatch(ctx context.Context, batch int) (int, error) {
	var n int
	err := pgx.BeginTxFunc(ctx, st.cfg.DB, pgx.TxOptions{}, func(tx pgx.Tx) error {
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
		return 0, fmt.Errorf("outboxpg: prune: %w", err)
	}
	return n, nil
}
