// Package step makes a handler's effects outside its database recoverable:
// a handler (a queue message's or an HTTP request's) is a sequence of named
// steps, and each step's outcome is recorded in the record that already
// guards the handler (the message's dedupe record, the request's
// Idempotency-Key record). A retry, a redelivery after a crash, a takeover
// after a lease ran out, or a redrive resumes after the last completed
// step and gets its recorded result back; a completed step never runs
// again.
//
//	charge, err := step.Run(ctx, "charge", step.Options{
//		Policy:        step.Reconcile,
//		ReconcileFunc: func(ctx context.Context) (step.Reconciliation, error) { return bank.Find(ctx, ref) },
//	}, func(ctx context.Context) ([]byte, error) {
//		return bank.Charge(ctx, ref, amount) // Idempotency-Key: ref
//	})
//	if err != nil {
//		return err // an unknown outcome is retried, reconciled or parked as the policy says
//	}
//	return applyInOneTransaction(ctx, charge) // the final step completes the record
//
// The recorder comes from the context: dedupe.Middleware (the consumer and
// the Lambda adapter) and the idempotency middleware (its lease mode) put
// one there when their store records steps (every store of sqsonce does:
// memory, DynamoDB and PostgreSQL). Without one, Run fails with
// [ErrNoRecorder] and runs nothing.
//
// # Outcome unknown
//
// A step's outcome is unknown when its function returned an error that
// [IsUnknown] accepts (a timeout, a broken connection, an answer that never
// came, the step's own [Options.Timeout]; mark others with [Unknown]), or
// when the attempt that started it stopped before recording its outcome
// (its process died: the next owner finds it "started"). The next attempt
// does not run it blindly. The step's [Policy] decides:
//
//   - [Reconcile]: [Options.ReconcileFunc] asks the downstream and answers
//     [Done] (with the result: recorded, not run again), [NotDone] (run it
//     now) or [StillUnknown] (the message is retried later with the
//     consumer's backoff; an HTTP request answers 503).
//   - [Rerun]: run it again. Safe only when the downstream dedupes by a
//     key the step passes to it (the message's dedupe id as the
//     Idempotency-Key of the call).
//   - [Park]: no automatic decision. The message is dead-lettered with
//     class outcome_unknown and the step's name; an HTTP request answers
//     503. A person resolves the step as applied or not applied through
//     the store (dedupe's Resolve), and a redrive carries the message to
//     completion.
//
// # Results
//
// A step's result is stored in the record: keep it small (an id, a
// status, a short JSON). Results over [MaxResultBytes] are refused. A
// step's name is 1 to [MaxNameBytes] letters, digits and "_-.:".
//
// docs/architecture.md ("Steps") describes the record's step states.
package step
