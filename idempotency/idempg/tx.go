package idempg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqsonce/sqsonce/idempotency"
	"github.com/sqsonce/sqsonce/internal/pgutil"
)

// BeginTx opens one request's transaction for the middleware's
// transactional mode: pass it as idempotency.Config.BeginTxFunc, and the
// handler's work (reached with [TxFromContext]) and the stored response
// commit together or not at all.
//
//	mw, err := idempotency.New(idempotency.Config{Store: store, BeginTxFunc: store.BeginTx, ScopeFunc: apiKeyID})
//
// The transaction has Config.TxOptions (READ COMMITTED by default), and
// its first statement claims the key (see the package doc: the key is
// held by a transaction-scoped advisory lock, not a lease). It holds one
// connection of Config.DB while the handler runs.
func (s *Store) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	tx, err := s.db.BeginTx(ctx, s.txOpts)
	if err != nil {
		return nil, fmt.Errorf("idempg: begin: %w", err)
	}
	return &requestTx{s: s, tx: tx}, nil
}

// requestTx is the idempotency.Tx of [Store.BeginTx].
type requestTx struct {
	s  *Store
	tx pgx.Tx
}

// lockKey takes the transaction-scoped advisory lock of the record key $1
// without waiting, and reports whether it got it. The lock's 64-bit key is
// a hash of the record key seeded with the table's oid, so the tables of
// two schemas never share a lock; another use of advisory locks in the
// database collides with it only by a 64-bit hash collision (a spurious
// 409 at worst).
const lockKey = `SELECT pg_try_advisory_xact_lock(hashtextextended($1, '` + table + `'::regclass::oid::bigint))`

// Claim implements [idempotency.Tx]. In the request's transaction it
// takes the key's advisory lock (taken by another transaction: InProgress
// at once), then writes the IN_PROGRESS record with the statement of
// [Store.Claim]; the record is only ever committed COMPLETED, with the
// work. A transaction whose snapshot predates a commit on the key (under
// REPEATABLE READ or SERIALIZABLE, the previous holder committing between
// the snapshot and the lock) fails that write with a serialization
// failure: nothing ran yet, so the claim starts a fresh transaction and
// tries again (three attempts in all).
func (t *requestTx) Claim(ctx context.Context, key, fingerprint string) (idempotency.Claim, error) {
	for attempt := 0; ; attempt++ {
		c, err := t.claim(ctx, key, fingerprint)
		if err == nil || attempt >= 2 || !pgutil.Transient(err) {
			return c, err
		}
		_ = t.tx.Rollback(ctx)
		tx, berr := t.s.db.BeginTx(ctx, t.s.txOpts)
		if berr != nil {
			return idempotency.Claim{}, fmt.Errorf("idempg: claim: begin again after %w: %w", err, berr)
		}
		t.tx = tx
	}
}

func (t *requestTx) claim(ctx context.Context, key, fingerprint string) (idempotency.Claim, error) {
	var locked bool
	if err := t.tx.QueryRow(ctx, lockKey, key).Scan(&locked); err != nil {
		return idempotency.Claim{}, fmt.Errorf("idempg: claim: lock: %w", err)
	}
	if !locked {
		// Another request's transaction holds the key: it is running now.
		return idempotency.Claim{Status: idempotency.InProgress}, nil
	}
	now := t.s.now()
	// No lease: lease_until is now, and the transaction holds the key.
	c, decided, err := t.s.claimOnce(ctx, t.tx, key, fingerprint, now, now)
	if c.Status == idempotency.Claimed {
		c.LeaseUntil, c.Steps = time.Time{}, nil // the transactional mode records no steps
	}
	if err != nil || decided {
		return c, err
	}
	// A record the write did not take but our clock calls dead (a claim
	// without a lease end): busy for a moment.
	return idempotency.Claim{Status: idempotency.InProgress, LeaseUntil: now.Add(time.Second)}, nil
}

func (t *requestTx) Complete(ctx context.Context, key, token string, resp idempotency.Response) error {
	return t.s.complete(ctx, t.tx, key, token, resp)
}

func (t *requestTx) Commit(ctx context.Context) error {
	err := t.tx.Commit(ctx)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pgErr), errors.Is(err, pgx.ErrTxCommitRollback), errors.Is(err, pgx.ErrTxClosed), pgconn.SafeToRetry(err):
		// The server answered, or nothing was sent: not committed.
		return fmt.Errorf("idempg: commit: %w", err)
	}
	// The COMMIT may have reached the server: a broken connection, a
	// timeout.
	return fmt.Errorf("idempg: commit: %w: %w", idempotency.ErrOutcomeUnknown, err)
}

func (t *requestTx) Rollback(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("idempg: rollback: %w", err)
	}
	return nil
}

// TxFromContext returns the pgx.Tx the middleware opened for the request
// whose context is ctx (Config.BeginTxFunc = [Store.BeginTx]), or nil
// outside that mode. The handler does its work in it and neither commits
// nor rolls it back: the middleware does, with the stored response.
//
//	func createCredit(w http.ResponseWriter, r *http.Request) {
//		tx := idempg.TxFromContext(r.Context())
//		if _, err := tx.Exec(r.Context(), `INSERT INTO credits (id, account, amount) VALUES ($1, $2, $3)`, id, acct, amount); err != nil {
//			http.Error(w, "could not credit", http.StatusInternalServerError) // a 5xx rolls back
//			return
//		}
//		w.WriteHeader(http.StatusCreated)
//	}
func TxFromContext(ctx context.Context) pgx.Tx {
	if t, ok := idempotency.TxFromContext(ctx).(*requestTx); ok {
		return t.tx
	}
	return nil
}
