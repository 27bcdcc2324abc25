package idempotency

import "context"

// Attach hands work to the store, to be committed with the request's
// completed record in one transaction when its handler returns
// ([Completion.Work]): the work and the stored response commit together or
// not at all, and the client gets the handler's response only once they
// have. A store package's helper calls it with work of its own type
// (idemdynamo.Transact attaches DynamoDB writes); the store's Complete
// takes back what its helpers attached. If the commit fails, nothing was
// written, the key is released and the client gets a problem: 409
// (TypeWriteConflict, a condition on the work failed; or TypeLeaseLost),
// 500 without Retry-After (TypeCommitRefused: work the store can never
// commit, [ErrWorkUnsupported] among it) or 503 (TypeCommitFailed). A
// commit whose answer was lost answers 503 TypeOutcomeUnknown: it may
// have happened, and the retry learns which.
//
// A nil work attaches nothing: Attach then only reports whether work could
// be attached. It returns ErrNoKey when ctx is not a request holding a
// key, ErrResponseStarted when the response was already sent unstored,
// and ErrWorkUnsupported in the transactional mode (Config.BeginTxFunc),
// where the handler works in the request's own transaction instead.
func Attach(ctx context.Context, work any) error {
	st := fromContext(ctx)
	if st == nil {
		return ErrNoKey
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.tx != nil {
		return ErrWorkUnsupported
	}
	if st.streamed {
		return ErrResponseStarted
	}
	if work != nil {
		st.work = append(st.work, work)
	}
	return nil
}
