package idempotency

import "context"

// Tx is one request's database transaction in the middleware's
// transactional mode (Config.BeginTxFunc): the handler does its work in
// it, the middleware stores the response in it with [Tx.Complete] and
// commits, so the work and the stored response are durable together or
// not at all. A store package provides it (postgres.Store.BeginTx) and a
// way for the handler to reach its driver's transaction
// (postgres.TxFromContext).
type Tx interface {
	// Complete marks the claim holding token COMPLETED with resp inside
	// the transaction. It returns an error wrapping [ErrNotOwner] when the
	// claim was lost, [ErrTooLarge] when resp cannot be stored.
	Complete(ctx context.Context, key, token string, resp Response) error
	// Commit commits the transaction. An error that leaves the outcome
	// unknown (the connection broke after the commit was sent) wraps
	// [ErrOutcomeUnknown]; any other error means nothing was committed.
	Commit(ctx context.Context) error
	// Rollback rolls the transaction back; after Commit it does nothing.
	Rollback(ctx context.Context) error
}

type txKey struct{}

// TxFromContext returns the transaction the middleware opened for the
// request whose context is ctx, or nil outside the transactional mode.
// Store packages unwrap it for their handlers (postgres.TxFromContext).
func TxFromContext(ctx context.Context) Tx {
	tx, _ := ctx.Value(txKey{}).(Tx)
	return tx
}
