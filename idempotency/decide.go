package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/step"
)

// This file is the middleware's decision, written once for both modes and
// free of I/O: from what is known of a keyed request (its claim's answer,
// or how its handler ended and what the store said since) it returns the
// action to take. middleware.go and txmode.go carry the actions out; the
// table in decide_test.go lists every ending.

// exit is how a handler ended.
type exit int

const (
	exitReturned exit = iota
	exitPanicked
	exitGoexit // runtime.Goexit (t.FailNow in a test server, for one)
)

// ended is what the middleware knows of a claimed request once its
// handler has ended, and of the store calls made since.
type ended struct {
	// tx: the transactional mode (Config.BeginTxFunc): the request's
	// transaction holds the key, and "release" means roll back.
	tx   bool
	exit exit
	// status is the response's status.
	status int
	// released: the handler called Release.
	released bool
	// work: work was attached with Attach (the lease mode only).
	work bool
	// streamed: the response went out unstored (too large, no work).
	streamed bool
	// discarded: the response was dropped (too large, with work or in
	// the transactional mode).
	discarded bool
	// over: the response as stored is over Config.MaxResponseBytes.
	over bool
	// leaseLost: the middleware cancelled the handler, its lease lost.
	leaseLost bool
	// stepUnknown is the step (package step) whose outcome became unknown
	// in this attempt, nil when none (the lease mode only).
	stepUnknown *step.UnknownError
	// releaseServerErrors is Config.ReleaseServerErrors.
	releaseServerErrors bool

	// completed: the completion was made (Complete, and in the
	// transactional mode Commit); completeErr is its error, and
	// committing says the error is Commit's (Complete succeeded).
	completed   bool
	completeErr error
	committing  bool
	// keptStatus: the record was completed not retained (its status
	// only); keptErr is that call's error.
	keptStatus bool
	keptErr    error
}

// storeCall is a store call the decision needs made, and its answer known,
// before it can decide the end.
type storeCall int

const (
	callNone storeCall = iota
	// callComplete completes the record with the response (and the work),
	// and in the transactional mode commits.
	callComplete
	// callKeepStatus completes the record not retained: its status and
	// the headers that do not describe the body it no longer has. After a
	// failed callComplete it gets a fresh settle timeout.
	callKeepStatus
)

// problemReply is an application/problem+json answer (see writeProblem).
type problemReply struct {
	status     int
	typ        string
	detail     string
	retryAfter int
}

// logLine is one log entry of the request's record logger.
type logLine struct {
	level  zapcore.Level
	msg    string
	fields []zap.Field
}

// action is what the middleware does, in this order: the store call (then
// it decides again), or: release the key (the lease mode's fenced Release,
// the transactional mode's rollback), write the log lines, answer (a
// replay, a problem, or the handler's response), count the outcome.
type action struct {
	next    storeCall
	release bool
	logs    []logLine
	// run: the claim is the caller's: run the handler (decideClaim only).
	run bool
	// replay is a stored response to replay (decideClaim only).
	replay *Response
	// problem, when set, is the answer; otherwise deliver says whether
	// the handler's response is sent (unless it streamed already).
	problem *problemReply
	deliver bool
	outcome Outcome
	// status is the status counted with the outcome: the one the client
	// gets (500 when a panic or runtime.Goexit abandoned the request).
	status int
}

func warn(msg string, fields ...zap.Field) logLine {
	return logLine{level: zapcore.WarnLevel, msg: msg, fields: fields}
}

func logError(msg string, fields ...zap.Field) logLine {
	return logLine{level: zapcore.ErrorLevel, msg: msg, fields: fields}
}

// decideClaim decides what a claim's answer c (or its error err) means
// for the request: run its handler, or answer at once. now dates the
// wait of a 409. In the transactional mode a claim that is not the
// caller's rolls the transaction back.
func decideClaim(c Claim, err error, tx bool, now time.Time) action {
	if err == nil && c.Status == Claimed {
		return action{run: true}
	}
	a := action{release: tx}
	switch {
	case err != nil:
		a.logs = []logLine{warn("idempotency: claim failed", zap.Error(err))}
		a.problem = &problemReply{http.StatusServiceUnavailable, TypeStoreUnavailable, "the idempotency store did not answer; nothing ran", 1}
		a.outcome = OutcomeStoreError
	case c.Status == Completed:
		a.replay = c.Response
		a.outcome, a.status = OutcomeReplayed, c.Response.Status
		return a
	case c.Status == InProgress && tx:
		// Another transaction holds the key while it lives: it is running
		// now, and its end is unknown.
		wait := 1
		if !c.LeaseUntil.IsZero() {
			wait = retryAfter(c.LeaseUntil.Sub(now))
		}
		a.problem = &problemReply{http.StatusConflict, TypeInProgress, "a request with this key is still running; retry after it ends", wait}
		a.outcome = OutcomeInProgress
	case c.Status == InProgress:
		// Only the lease is known: the owner may be running, or its
		// process may have died. Either way the key is free for this
		// request once the stored lease ends, unless the owner extends it.
		wait := retryAfter(c.LeaseUntil.Sub(now))
		a.problem = &problemReply{http.StatusConflict, TypeInProgress, fmt.Sprintf(
			"a request with this key is in progress or stopped without finishing; its lease ends in %d s, when a retry gets its response or, if it stopped, runs it", wait), wait}
		a.outcome = OutcomeInProgress
	case c.Status == KeyReused:
		a.problem = &problemReply{http.StatusUnprocessableEntity, TypeKeyReused, "this key was used for a different request (method, path, query or body)", 0}
		a.outcome = OutcomeKeyReused
	default:
		a.logs = []logLine{logError("idempotency: claim: unexpected status", zap.Int("status", int(c.Status)))}
		a.problem = &problemReply{http.StatusInternalServerError, TypeStoreUnavailable, "", 0}
		a.outcome = OutcomeStoreError
	}
	a.status = a.problem.status
	return a
}

// decide decides what happens to a claimed request whose handler has
// ended: f holds what is known so far. An action with a next call is
// carried out, its answer added to f, and decide asked again.
func decide(f ended, maxResponseBytes int) action {
	var a action
	switch {
	case f.exit != exitReturned:
		a = decideAbandoned(f)
	case f.tx:
		a = decideTx(f, maxResponseBytes)
	default:
		a = decideLease(f, maxResponseBytes)
	}
	if a.problem != nil {
		a.status = a.problem.status
	}
	return a
}

// decideAbandoned: a panic or runtime.Goexit abandoned the request. Its
// key is released (rolled back), so a retry runs. A panic goes on up.
func decideAbandoned(f ended) action {
	a := action{release: true, outcome: OutcomeReleased, status: http.StatusInternalServerError}
	if f.exit == exitGoexit {
		msg := "idempotency: the handler called runtime.Goexit: key released"
		if f.tx {
			msg = "idempotency: the handler called runtime.Goexit: rolled back, key freed"
		}
		a.logs = []logLine{warn(msg)}
	}
	return a
}

// stepRetryAfter is the Retry-After of a 503 TypeStepOutcomeUnknown
// whose step reconciles or reruns on the retry.
const stepRetryAfter = 2

// decideStepUnknown: one of the request's steps has an unknown outcome in
// this attempt. The key is released with its steps kept (the retry
// resumes from them), and the client gets 503 TypeStepOutcomeUnknown, not
// the handler's response, which is neither sent nor stored.
func decideStepUnknown(f ended) action {
	u := f.stepUnknown
	a := action{release: true, outcome: OutcomeStepUnknown, status: http.StatusServiceUnavailable}
	if f.streamed {
		// Too large to hold, it went out already: nothing else can be sent.
		a.logs = []logLine{logError("idempotency: a step's outcome is unknown but the response was already streamed; the key is released", zap.String("step", u.Step))}
		return a
	}
	a.problem = &problemReply{http.StatusServiceUnavailable, TypeStepOutcomeUnknown, fmt.Sprintf(
		"the outcome of the request's step %q is unknown; nothing is replayed. Retry with the same key: the retry finds out and carries the request on", u.Step), stepRetryAfter}
	if u.Policy == step.Park {
		a.problem.retryAfter = 0
		a.problem.detail = fmt.Sprintf("the outcome of the request's step %q is unknown and waits for an operator's decision; retries with the same key get this answer until then", u.Step)
	}
	return a
}

// decideLease decides the end of a request of the lease mode.
func decideLease(f ended, maxResponseBytes int) action {
	limit := zap.Int("max_response_bytes", maxResponseBytes)
	switch {
	case f.stepUnknown != nil:
		return decideStepUnknown(f)
	case f.discarded, f.over && f.work && !f.released:
		return action{release: true,
			logs:    []logLine{warn("idempotency: transactional response too large to store: nothing committed, key released", limit)},
			problem: &problemReply{http.StatusInternalServerError, TypeResponseTooLarge, "the response was too large to store with the request's writes; nothing was committed", 0},
			outcome: OutcomeNotStored}
	case f.leaseLost && f.status >= 500:
		// The failure is the middleware's doing (it cancelled the handler):
		// stored, it would be replayed for the record's whole life.
		return action{release: true, deliver: true, outcome: OutcomeLeaseLost, status: f.status,
			logs: []logLine{warn("idempotency: the handler failed after its lease was lost: response not stored, key released", zap.Int("status", f.status))}}
	case f.released || releasedStatus(f.status, f.releaseServerErrors):
		return action{release: true, deliver: true, outcome: OutcomeReleased, status: f.status}
	case f.streamed || f.over:
		if !f.keptStatus {
			return action{next: callKeepStatus}
		}
		a := keptStatus(f)
		a.logs = append(a.logs, warn("idempotency: response too large to store: delivered, the record keeps its status only", limit))
		return a
	case !f.completed:
		return action{next: callComplete}
	case f.completeErr == nil:
		return action{deliver: true, outcome: OutcomeExecuted, status: f.status}
	case !f.work:
		// The handler's effects happened: its response is the truth, even
		// unstored, and the request must not run again.
		if errors.Is(f.completeErr, ErrNotOwner) {
			return action{deliver: true, outcome: OutcomeLeaseLost, status: f.status,
				logs: []logLine{warn("idempotency: lease lost before completion: another request owns the key; the effect may repeat", zap.Error(f.completeErr))}}
		}
		if !f.keptStatus {
			return action{next: callKeepStatus,
				logs: []logLine{warn("idempotency: response not stored: completing the record with its status only", zap.Error(f.completeErr))}}
		}
		return keptStatus(f)
	}
	// Work was attached: the handler's response is only true if its writes
	// committed.
	err := f.completeErr
	var cerr *ConditionError
	switch {
	case errors.Is(err, ErrTooLarge):
		return action{release: true,
			logs:    []logLine{warn("idempotency: transactional response too large for the store: nothing committed, key released", zap.Error(err))},
			problem: &problemReply{http.StatusInternalServerError, TypeResponseTooLarge, "the response was too large to store with the request's writes; nothing was committed", 0},
			outcome: OutcomeNotStored}
	case errors.Is(err, ErrNotOwner):
		return action{
			logs:    []logLine{warn("idempotency: lease lost before the commit: nothing committed", zap.Error(err))},
			problem: &problemReply{http.StatusConflict, TypeLeaseLost, "the request's lease was taken over before it committed; nothing was committed", 1},
			outcome: OutcomeLeaseLost}
	case errors.As(err, &cerr):
		return action{release: true,
			problem: &problemReply{http.StatusConflict, TypeWriteConflict, "a condition on the request's writes failed; nothing was committed", 0},
			outcome: OutcomeCommitFailed}
	case outcomeUnknown(err):
		// The release is fenced on IN_PROGRESS: it frees the key if the
		// commit did not happen and leaves the completed record if it did.
		return commitUnknown(err)
	case errors.Is(err, ErrPermanent), errors.Is(err, ErrWorkUnsupported):
		return action{release: true,
			logs:    []logLine{logError("idempotency: the store refused the request's writes: nothing committed, key released", zap.Error(err))},
			problem: &problemReply{http.StatusInternalServerError, TypeCommitRefused, "the store refused the request's writes; nothing was committed, and the same request cannot succeed", 0},
			outcome: OutcomeCommitFailed}
	}
	return action{release: true,
		logs:    []logLine{warn("idempotency: commit failed: nothing committed, key released", zap.Error(err))},
		problem: &problemReply{http.StatusServiceUnavailable, TypeCommitFailed, "the request's writes could not be committed; nothing was committed", 1},
		outcome: OutcomeCommitFailed}
}

// keptStatus is the end of a request whose record was completed not
// retained (f.keptErr the answer): the response is delivered. When that
// completion failed too the record stays IN_PROGRESS and the key runs
// again once its lease ends: nothing better is left.
func keptStatus(f ended) action {
	a := action{deliver: true, outcome: OutcomeNotStored, status: f.status}
	switch {
	case f.keptErr == nil:
	case errors.Is(f.keptErr, ErrNotOwner):
		// Completed by an attempt whose answer was lost, or taken over.
		a.outcome = OutcomeLeaseLost
		a.logs = []logLine{warn("idempotency: the record is no longer this request's: completed already, or taken over", zap.Error(f.keptErr))}
	default:
		a.outcome = OutcomeStoreError
		a.logs = []logLine{logError("idempotency: the record could not be completed: the key runs again once its lease ends", zap.Error(f.keptErr))}
	}
	return a
}

// commitUnknown answers a commit whose outcome is unknown, once the key
// is free if the commit did not happen (a fenced release in the lease
// mode; in the transactional mode the database ends the transaction
// either way): the retry either runs or gets the stored response.
func commitUnknown(err error) action {
	return action{release: true,
		logs: []logLine{warn("idempotency: commit outcome unknown: the retry replays the response if it committed, runs again if not", zap.Error(err))},
		problem: &problemReply{http.StatusServiceUnavailable, TypeOutcomeUnknown,
			"the request's commit was sent but its outcome is unknown; retry with the same key: the retry gets the response if it committed, and runs the request if it did not", 1},
		outcome: OutcomeCommitFailed}
}

// decideTx decides the end of a request of the transactional mode: the
// response is stored in the handler's transaction and committed, then
// sent; or the transaction is rolled back, which frees the key (nothing
// else holds it: there is no lease to release).
func decideTx(f ended, maxResponseBytes int) action {
	switch {
	case f.discarded, f.over && !f.released:
		// Unlike the lease mode, the record is not completed "not
		// retained": the work rolls back with it, so the request has had
		// no effect and its retry may run.
		return action{release: true,
			logs: []logLine{warn("idempotency: transactional response too large to store: rolled back, key freed",
				zap.Int("max_response_bytes", maxResponseBytes))},
			problem: &problemReply{http.StatusInternalServerError, TypeResponseTooLarge, "the response was too large to store with the request's work; nothing was committed", 0},
			outcome: OutcomeNotStored}
	case f.released || releasedStatus(f.status, true):
		// The handler failed, was refused (429) or gave the key back: its
		// work must not commit, and a retry runs it again.
		return action{release: true, deliver: true, outcome: OutcomeReleased, status: f.status}
	case !f.completed:
		return action{next: callComplete}
	case f.completeErr == nil:
		return action{deliver: true, outcome: OutcomeExecuted, status: f.status}
	}
	// Nothing was committed, or the COMMIT's outcome is unknown: either
	// way the transaction is rolled back (a no-op after a commit that
	// happened).
	err := f.completeErr
	switch {
	case errors.Is(err, ErrNotOwner):
		return action{release: true,
			logs:    []logLine{warn("idempotency: the claim was lost before the commit: rolled back", zap.Error(err))},
			problem: &problemReply{http.StatusConflict, TypeLeaseLost, "the request's claim on the key was lost before it committed; nothing was committed", 1},
			outcome: OutcomeLeaseLost}
	case errors.Is(err, ErrTooLarge):
		return action{release: true,
			logs:    []logLine{warn("idempotency: transactional response too large for the store: rolled back, key freed", zap.Error(err))},
			problem: &problemReply{http.StatusInternalServerError, TypeResponseTooLarge, "the response was too large to store with the request's work; nothing was committed", 0},
			outcome: OutcomeNotStored}
	case f.committing && outcomeUnknown(err):
		// The COMMIT was sent: the database committed it, or ends the
		// transaction without it and frees the key.
		return commitUnknown(err)
	case errors.Is(err, ErrPermanent):
		return action{release: true,
			logs:    []logLine{logError("idempotency: the store refused the request's work: rolled back, key freed", zap.Error(err))},
			problem: &problemReply{http.StatusInternalServerError, TypeCommitRefused, "the store refused the request's work; nothing was committed, and the same request cannot succeed", 0},
			outcome: OutcomeCommitFailed}
	}
	// Complete or Commit answered: nothing was committed, and the
	// rollback frees the key.
	return action{release: true,
		logs:    []logLine{warn("idempotency: commit failed: rolled back, key freed", zap.Error(err))},
		problem: &problemReply{http.StatusServiceUnavailable, TypeCommitFailed, "the request's work could not be committed; nothing was committed", 1},
		outcome: OutcomeCommitFailed}
}

// releasedStatus reports whether a response with status gives the key
// back instead of being stored: a 429 (the request was not run), and a
// 5xx when releaseServerErrors.
func releasedStatus(status int, releaseServerErrors bool) bool {
	return status == http.StatusTooManyRequests || (releaseServerErrors && status >= 500)
}

// outcomeUnknown reports a commit error after which the commit may have
// been applied.
func outcomeUnknown(err error) bool {
	return errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
