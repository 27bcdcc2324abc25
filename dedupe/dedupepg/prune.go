package dedupepg

import (
	"context"
	"fmt"

	"github.com/sqsonce/sqsonce/internal/pgutil"
	"github.com/sqsonce/sqsonce/pgstore"
)

// pruneSQL deletes up to $2 expired rows. SKIP LOCKED makes concurrent
// prunes take different rows and never wait on a claim in flight; FOR
// UPDATE re-checks expires_at on the row's latest version, so a row
// re-claimed meanwhile (a new expires_at) stays.
const pruneSQL = `DELETE FROM ` + table + ` WHERE pk IN (
	SELECT pk FROM ` + table + ` WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED
) AND expires_at < $1`

// Prune deletes expired records (expires_at before the store's now) of
// every namespace, in batches of opts.BatchSize rows, each its own
// transaction, until none is left or opts.MaxBatches ran. It returns how
// many rows it deleted. PostgreSQL has no TTL: schedule Prune, for example
// hourly from every worker (it is safe to run concurrently: batches skip
// the rows another prune holds) or from one cron job. An expired record is
// dead for Claim whether or not it was pruned; pruning only bounds the
// table.
func (s *Store) Prune(ctx context.Context, opts pgstore.PruneOptions) (int, error) {
	now := s.now()
	return pgutil.Prune(ctx, opts.BatchSize, opts.MaxBatches, func(ctx context.Context, batch int) (int, error) {
		tag, err := s.db.Exec(ctx, pruneSQL, now, batch)
		if err != nil {
			return 0, fmt.Errorf("dedupepg: prune: %w", err)
		}
		return int(tag.RowsAffected()), nil
	})
}
