package idemdynamo

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsonce/sqsonce/idempotency"
)

// Transact hands DynamoDB writes to the middleware instead of making them:
// when the handler returns, the [Store] commits them in one
// TransactWriteItems with the completed key record holding the handler's
// response (see [idempotency.Attach]). The work and the stored response
// commit together or not at all; the client gets the handler's response
// only once they have. If the commit fails, nothing was written, the key
// is released and the client gets a problem: 409 (TypeWriteConflict, a
// condition on one of these writes failed; or TypeLeaseLost), 500 without
// Retry-After (TypeCommitRefused: writes DynamoDB can never accept, such
// as more than a transaction holds) or 503 (TypeCommitFailed). A commit
// whose answer was lost answers 503 TypeOutcomeUnknown: it may have
// happened, and the retry learns which.
//
// Any TransactWriteItem may be added, outbox events included: call
// Transact once per source of writes, e.g.
//
//	events, err := outboxStore.Put(outbox.Event{Entity: account, Payload: credit})
//	if err == nil {
//		err = idemdynamo.Transact(r.Context(), append(events, putCredit)...)
//	}
//
// An outbox order conflict (another writer committed a later event of the
// entity first) then cancels the commit like any failed condition: 409,
// the key released, and the client's retry builds fresh events.
// [TransactFunc] builds them at commit time and retries at once instead.
// The store must be this package's (the memory and PostgreSQL stores
// answer idempotency.ErrWorkUnsupported). DynamoDB's limits apply: 100
// items per transaction, the record included.
//
// It returns idempotency.ErrNoKey when ctx is not a request holding a key,
// idempotency.ErrResponseStarted when the response was already sent
// unstored, and idempotency.ErrWorkUnsupported in the transactional mode
// (idempotency.Config.BeginTxFunc), where the handler writes in its own
// transaction instead.
func Transact(ctx context.Context, items ...types.TransactWriteItem) error {
	if len(items) == 0 {
		return idempotency.Attach(ctx, nil)
	}
	return idempotency.Attach(ctx, writes(slices.Clone(items)))
}

// TransactFunc is [Transact] with writes built at commit time: the store
// calls build for each attempt of the transaction, and when an attempt is
// cancelled and retry(err) reports true it builds them afresh and tries
// again (up to 5 attempts in all). Use it for writes that depend on state
// another writer may move on, such as outbox events, whose order records
// are stamped when built:
//
//	err := idemdynamo.TransactFunc(r.Context(), func() ([]types.TransactWriteItem, error) {
//		return outboxStore.Put(outbox.Event{Entity: account, Payload: credit})
//	}, outboxStore.IsOrderConflict)
//
// build may run several times and after the handler returned; it must not
// write anything itself. retry may be nil (no retry).
func TransactFunc(ctx context.Context, build func() ([]types.TransactWriteItem, error), retry func(err error) bool) error {
	if build == nil {
		return idempotency.Attach(ctx, nil)
	}
	return idempotency.Attach(ctx, builder{build: build, retry: retry})
}

// writes are the fixed writes of one Transact call.
type writes []types.TransactWriteItem

// builder makes writes at commit time (one TransactFunc call).
type builder struct {
	build func() ([]types.TransactWriteItem, error)
	retry func(err error) bool
}
