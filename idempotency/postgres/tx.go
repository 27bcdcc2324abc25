package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqsonce/sqsonce/idempotency"
)

// BeginTx opens one request's transaction for the middleware's
// transactional mode: pass it as idempotency.Config.BeginTxFunc, and the
// handler's work (reached with [TxFromContext]) and the stored response
// commit together or not at all.
//
//	mw, err := idempotency.New(idempotency.Config{Store: store, BeginTxFunc: store.BeginTx, ScopeFunc: apiKeyID})
//
// The transaction is READ COMMITTED (the server's default); a handler
// that needs more runs SET TRANSACTION ISOLATION LEVEL first. It holds one
// connection of Config.DB while the handler runs.
func (s *Store) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("idempotency/postgres: begin: %w", err)
	}
	return &requestTx{s: s, tx: tx}, nil
}

// requestTx is the idempotency.Tx of [Store.BeginTx].
type requestTx struct {
	s  *Store
	tx pgx.Tx
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
		return fmt.Errorf("idempotency/postgres: commit: %w", err)
	}
	// The COMMIT may have reached the server: a broken connection, a
	// timeout.
	return fmt.Errorf("idempotency/postgres: commit: %w: %w", idempotency.ErrOutcomeUnknown, err)
}

func (t *requestTx) Rollback(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("idempotency/postgres: rollback: %w", err)
	}
	return nil
}

// TxFromContext returns the pgx.Tx the middleware opened for the request
// whose context is ctx (Config.BeginTxFunc = [Store.BeginTx]), or nil
// outside that mode. The handler does its work in it and neither commits
// nor rolls it back: the middleware does, with the stored response.
//
//	func createCredit(w http.ResponseWriter, r *http.Request) {
//		tx := postgres.TxFromContext(r.Context())
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
