package idempotency

import "context"

// Tx is one request's database transaction in the middleware's
// transactional mode (Config.BeginTxFunc). It claims the request's key
// ([Tx.Claim]) and holds it for as long as it lasts; the handler does its
// work in it, and the middleware stores the response in it with
// [Tx.Complete] and commits, so the work and the stored response are
// durable together or not at all. When the transaction ends without a
// commit (a rollback, or its connection dying with its process) the key is
// free at once: nothing of the request is left, and no lease has to run
// out. A store package provides it (idempg.Store.BeginTx) and a way for
// the handler to reach its driver's transaction (idempg.TxFromContext).
type Tx interface {
	// Claim takes key for the request of fingerprint, before the handler
	// runs, and holds it until the transaction ends. It answers Claimed
	// (with a Token for Complete) when no live record holds the key and no
	// other transaction holds it; InProgress when another request holds it
	// (LeaseUntil is zero when that is a transaction, whose end is
	// unknown); Completed with the stored Response; or KeyReused when the
	// record is another request's. On any answer but Claimed, and on an
	// error, the middleware rolls the transaction back.
	Claim(ctx context.Context, key, fingerprint string) (Claim, error)
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
// Store packages unwrap it for their handlers (idempg.TxFromContext).
func TxFromContext(ctx context.Context) Tx {
	tx, _ := ctx.Value(txKey{}).(Tx)
	return tx
}
