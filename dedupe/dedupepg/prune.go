package dedupepg

import (
	"cmp"
	"context"
	"fmt"
)

// PruneOptions bounds one [Store.Prune].
type PruneOptions struct {
	// BatchSize is the most rows one DELETE removes (one short
	// transaction). Defaults to 1000.
	BatchSize int
	// MaxBatches is the most DELETEs one call runs. Defaults to 100, so a
	// call removes at most 100,000 rows.
	MaxBatches int
}

// pruneSQL deletes up to $2 expired rows. SKIP LOCKED makes concurrent
// prunes take different rows and never wait on a claim in flight; FOR
// UPDATE re-checks expires_at on the row's latest version, so a row
// re-claimed meanwhile (a new expires_at) stays.
const pruneSQL = `DELETE FROM ` + Table + ` WHERE pk IN (
	SELECT pk FROM ` + Table + ` WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED
) AND expires_at < $1`

// Prune deletes expired records (expires_at before the store's now) of
// every namespace, in batches of BatchSize rows, each its own transaction,
// until none is left or MaxBatches ran. It returns how many rows it
// deleted. PostgreSQL has no TTL: schedule Prune, for example hourly from
// every worker (it is safe to run concurrently: batches skip the rows
// another prune holds) or from one cron job. An expired record is dead for
// Claim whether or not it was pruned; pruning only bounds the table.
func (s *Store) Prune(ctx context.Context, opts PruneOptions) (int, error) {
	batch := cmp.Or(opts.BatchSize, 1000)
	batches := cmp.Or(opts.MaxBatches, 100)
	now := s.now()
	total := 0
	for range batches {
		tag, err := s.db.Exec(ctx, pruneSQL, now, batch)
		if err != nil {
			return total, fmt.Errorf("dedupepg: prune: %w", err)
		}
		n := int(tag.RowsAffected())
		total += n
		if n < batch {
			break
		}
	}
	return total, nil
}
