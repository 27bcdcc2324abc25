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
//     keys in any order; nothing decoded or dropped), the body byte for
//     byte and Config.FingerprintHeaders. The key with another fingerprint
//     → 422, while the first request runs and after. The same JSON with
//     its keys in another order is another body, unless
//     Config.FingerprintFunc is [CanonicalJSONFingerprint], which compares
//     JSON bodies by value; a FingerprintFunc error → 400 [TypeBodyInvalid].
//   - A retry while the first holds the key → 409 with Retry-After (the
//     seconds left on its stored lease, rounded up, at least 1), saying
//     the first may be running or may have stopped (see Retries against
//     a lease).
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
//   - Effects outside the database can be recorded as steps (package
//     step; the lease mode, with a [StepStore]): a request taken over
//     after its owner died resumes after its last completed step, and a
//     step whose outcome is unknown answers 503 [TypeStepOutcomeUnknown],
//     the key released with its steps kept, never a replay.
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
// # Retries against a lease
//
// A store can only see a lease: a request whose process dies (kill -9, a
// lost host) leaves its record IN_PROGRESS, and its key stays closed
// until the lease ends, Config.Lease (30 s by default) after its last
// extension. Meanwhile a retry gets 409 [TypeInProgress] whose detail
// says the request "is in progress or stopped without finishing; its
// lease ends in N s" and whose Retry-After is that N. A client outlasts
// it with the retries it spends while the API restarts, plus one more
// after the first 409 if it honours Retry-After (Stripe's Python SDK
// does, up to 60 s), or, if it only backs off, enough retries that its
// waits add up to the lease: stripe-go's default of 2 retries (after
// 0.5 s and 1 s; it ignores Retry-After) gives up about 1.5 s in, and
// its backoff (0.5 s growing to 5 s, less up to a quarter of jitter)
// needs 11 retries for a 30 s lease, 5 for 10 s, 4 for 5 s. A shorter
// Lease frees a dead request's key sooner, at the price of an extension
// every Lease/3 and of losing the key when an extension cannot be made
// in time. The transactional mode (Config.BeginTxFunc) has no lease: a
// dead request's transaction ends and frees the key at once.
//
// # What it cannot do
//
// Without attached work or BeginTxFunc, a handler's effects and the stored response are two
// writes: if the process dies between them, the key runs again when its
// lease ends. Effects outside the store's database need their own
// idempotency downstream (pass the key on). A response too large to store
// is not replayed, only its status.
package idempotency
