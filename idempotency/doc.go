// Package idempotency is an Idempotency-Key middleware for net/http APIs,
// after the IETF HTTPAPI draft "The Idempotency-Key HTTP Header Field" and
// Stripe's documented behaviour, on the record model of package dedupe
// (docs/architecture.md): a lease, token fencing, a fingerprint, and
// expiry checked on read.
//
//	store, _ := idemdynamo.New(idemdynamo.Config{Client: dynamodb.NewFromConfig(cfg)}) // or idempotency.NewMemory
//	mw, err := idempotency.New(idempotency.Config{
//		Store: store,
//		ScopeFunc: func(r *http.Request) (string, error) {
//			return apiKeyID(r) // keys are per caller
//		},
//	})
//	if err != nil { ... }
//	http.Handle("POST /credits", mw.Wrap(createCredit))
//
// For each POST or PATCH (Config.Methods):
//
//   - The Idempotency-Key header is 1–255 visible ASCII characters bare,
//     or an RFC 8941 string in quotes (printable ASCII, spaces included,
//     with \" and \\ escapes); "abc" and abc are one key. Missing or
//     invalid → 400.
//   - The key is scoped to the caller (Config.ScopeFunc; an error → 401)
//     and stored hashed with the scope ([RecordKey]); neither is logged.
//   - The fingerprint is the method, path, raw query (pairs of distinct
//     keys in any order; nothing decoded or dropped), the body and
//     Config.FingerprintHeaders. The key with another fingerprint → 422,
//     while the first request runs and after.
//   - A retry while the first runs → 409 with Retry-After (the seconds left
//     on its lease, at least 1).
//   - A completed key replays the stored status, the allow-listed headers
//     (Config.ReplayHeaders; never Set-Cookie) and the body byte for byte,
//     with Idempotent-Replayed: true. A 5xx is stored and replayed too
//     unless Config.ReleaseServerErrors.
//   - [Release] (a validation failure), a 429, a panic or runtime.Goexit,
//     and a 5xx answered after the middleware cancelled the handler for a
//     lost lease release the key, so a retry runs.
//   - The handler's context is not cancelled when the client hangs up:
//     the request finishes and the retry of a dropped connection gets its
//     stored response (or 409 until it is done).
//   - The lease is extended every Lease/3 while the handler runs. After a
//     crash the key runs again once its lease ends; an owner whose lease
//     was taken over gets its context cancelled ([ErrLeaseLost]) and can
//     never complete or release the new owner's record.
//   - Records expire the store's TTL after their last write (24 h by
//     default: MemoryConfig.TTL, idemdynamo.Config.TTL), judged on read.
//   - A body over Config.MaxBodyBytes → 413. A response over
//     Config.MaxResponseBytes (or too large for the store, or whose
//     completion failed) is delivered; the record keeps its status and the
//     headers that do not describe its body, and a retry gets them with a
//     [TypeNotRetained] problem: a request that ran never runs again. The
//     case is counted ([OutcomeNotStored], [Middleware.Count],
//     Config.ObserveFunc).
//   - Writes the store can never commit → 500 [TypeCommitRefused], no
//     Retry-After; a commit whose answer was lost → 503
//     [TypeOutcomeUnknown]: a retry with the same key replays the response
//     if it committed, and runs if it did not.
//
// Responses to keyed requests are buffered, not streamed (http.Flusher is
// not offered), up to MaxResponseBytes. Errors are application/problem+json (RFC 9457), one type per case
// (TypeKeyMissing, TypeInProgress, ...).
//
// # Transactional completion
//
// A handler whose work is DynamoDB writes hands them to idemdynamo.Transact
// instead of making them (it attaches them to the request with [Attach]);
// the DynamoDB store commits them in one TransactWriteItems with the
// completed record holding the response, and only then is the response
// sent. The work and the stored response commit together or not at all.
// Anything that produces a types.TransactWriteItem (an outbox event, for
// one) is added the same way; idemdynamo.TransactFunc builds writes at
// commit time and builds them again after a conflict its retry function
// recognises (an outbox order conflict).
//
// With an SQL database, Config.BeginTxFunc (idempg.Store.BeginTx) runs
// each keyed request in a transaction the middleware opens and hands to
// the handler ([TxFromContext]; idempg.TxFromContext returns the
// pgx.Tx). The transaction claims the key ([Tx.Claim]) and holds it
// while it lasts, instead of a lease: a retry meanwhile gets 409 at once,
// and a request whose process or connection dies frees its key as the
// database ends its transaction. The response is stored in that
// transaction and committed with the handler's work; a panic or
// runtime.Goexit, [Release], a 429, a 5xx, a response too large to store
// or a failed commit roll it all back, so a retry runs the handler again.
// A commit whose answer was lost answers 503 [TypeOutcomeUnknown], one the
// store refuses for good 500 [TypeCommitRefused], as in the lease mode.
// Its isolation level is the store's (idempg.Config.TxOptions).
//
// # What it cannot do
//
// Without attached work or BeginTxFunc, a handler's effects and the stored response are two
// writes: if the process dies between them, the key runs again when its
// lease ends. Effects outside the store's database need their own
// idempotency downstream (pass the key on). A response too large to store
// is not replayed, only its status.
package idempotency
