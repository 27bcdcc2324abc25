package idempotency

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/sqsonce/sqsonce/step"
)

// verdict is an action as the table states it.
type verdict struct {
	next       storeCall
	run        bool
	release    bool
	deliver    bool
	replay     bool
	problem    string // the problem's type, "" for none
	retryAfter int
	outcome    Outcome
	status     int
	logs       []zapcore.Level
}

func (v verdict) String() string {
	return fmt.Sprintf("{next:%d run:%v release:%v deliver:%v replay:%v problem:%q retry-after:%d outcome:%s status:%d logs:%v}",
		v.next, v.run, v.release, v.deliver, v.replay, v.problem, v.retryAfter, v.outcome, v.status, v.logs)
}

func verdictOf(a action) verdict {
	v := verdict{next: a.next, run: a.run, release: a.release, deliver: a.deliver, replay: a.replay != nil, outcome: a.outcome, status: a.status}
	if a.problem != nil {
		v.problem, v.retryAfter = a.problem.typ, a.problem.retryAfter
		if a.problem.status != a.status {
			v.status = -a.problem.status // counted otherwise than answered: never
		}
	}
	for _, l := range a.logs {
		v.logs = append(v.logs, l.level)
	}
	return v
}

const (
	warnL  = zapcore.WarnLevel
	errorL = zapcore.ErrorLevel
)

var (
	errDown   = errors.New("store down")
	errRefuse = fmt.Errorf("store: %w", ErrPermanent)
)

// claimTable: every answer of a claim, in both modes.
var claimTable = []struct {
	name string
	tx   bool
	c    Claim
	err  error
	want verdict
}{
	{name: "claimed runs", c: Claim{Status: Claimed, Token: "t"},
		want: verdict{run: true}},
	{name: "claimed runs (tx)", tx: true, c: Claim{Status: Claimed, Token: "t"},
		want: verdict{run: true}},
	{name: "store error: 503, nothing ran", err: errDown,
		want: verdict{problem: TypeStoreUnavailable, retryAfter: 1, outcome: OutcomeStoreError, status: 503, logs: []zapcore.Level{warnL}}},
	{name: "store error rolls back (tx)", tx: true, err: errDown,
		want: verdict{release: true, problem: TypeStoreUnavailable, retryAfter: 1, outcome: OutcomeStoreError, status: 503, logs: []zapcore.Level{warnL}}},
	{name: "completed replays", c: Claim{Status: Completed, Response: &Response{Status: 201}},
		want: verdict{replay: true, outcome: OutcomeReplayed, status: 201}},
	{name: "completed replays (tx)", tx: true, c: Claim{Status: Completed, Response: &Response{Status: 201}},
		want: verdict{release: true, replay: true, outcome: OutcomeReplayed, status: 201}},
	{name: "in progress: 409 until the lease ends, rounded up", c: Claim{Status: InProgress, LeaseUntil: t0.Add(2500 * time.Millisecond)},
		want: verdict{problem: TypeInProgress, retryAfter: 3, outcome: OutcomeInProgress, status: 409}},
	{name: "in progress: 409 at least 1 s", c: Claim{Status: InProgress, LeaseUntil: t0.Add(-time.Minute)},
		want: verdict{problem: TypeInProgress, retryAfter: 1, outcome: OutcomeInProgress, status: 409}},
	{name: "in progress, no lease end: 409 after 1 s (tx)", tx: true, c: Claim{Status: InProgress},
		want: verdict{release: true, problem: TypeInProgress, retryAfter: 1, outcome: OutcomeInProgress, status: 409}},
	{name: "in progress with a lease end (tx)", tx: true, c: Claim{Status: InProgress, LeaseUntil: t0.Add(4 * time.Second)},
		want: verdict{release: true, problem: TypeInProgress, retryAfter: 4, outcome: OutcomeInProgress, status: 409}},
	{name: "key reused: 422", c: Claim{Status: KeyReused},
		want: verdict{problem: TypeKeyReused, outcome: OutcomeKeyReused, status: 422}},
	{name: "key reused: 422 (tx)", tx: true, c: Claim{Status: KeyReused},
		want: verdict{release: true, problem: TypeKeyReused, outcome: OutcomeKeyReused, status: 422}},
	{name: "unknown status: 500", c: Claim{Status: 99},
		want: verdict{problem: TypeStoreUnavailable, outcome: OutcomeStoreError, status: 500, logs: []zapcore.Level{errorL}}},
}

var t0 = time.Unix(1_800_000_000, 0)

// TestClaimTable: what each claim answer does to the request.
func TestClaimTable(t *testing.T) {
	t.Parallel()
	for _, row := range claimTable {
		if got := verdictOf(decideClaim(row.c, row.err, row.tx, t0)); !equalVerdict(got, row.want) {
			t.Errorf("%s:\n got %v\nwant %v", row.name, got, row.want)
		}
	}
}

// lease and tx are the facts of a handler that returned 201 with nothing
// special, in each mode.
var (
	lease = ended{status: 201}
	tx    = ended{tx: true, status: 201}
)

// with returns f changed by each of fs.
func with(f ended, fs ...func(*ended)) ended {
	for _, fn := range fs {
		fn(&f)
	}
	return f
}

func status(s int) func(*ended) { return func(f *ended) { f.status = s } }
func completed(err error) func(*ended) {
	return func(f *ended) { f.completed, f.completeErr = true, err }
}
func committed(err error) func(*ended) {
	return func(f *ended) { f.completed, f.committing, f.completeErr = true, true, err }
}
func kept(err error) func(*ended) { return func(f *ended) { f.keptStatus, f.keptErr = true, err } }
func stepUnknown(p step.Policy) func(*ended) {
	return func(f *ended) { f.stepUnknown = &step.UnknownError{Step: "charge", Policy: p} }
}

var (
	panicked     = func(f *ended) { f.exit = exitPanicked }
	goexit       = func(f *ended) { f.exit = exitGoexit }
	released     = func(f *ended) { f.released = true }
	work         = func(f *ended) { f.work = true }
	streamed     = func(f *ended) { f.streamed = true }
	discarded    = func(f *ended) { f.discarded = true }
	over         = func(f *ended) { f.over = true }
	leaseLost    = func(f *ended) { f.leaseLost = true }
	releaseFiveX = func(f *ended) { f.releaseServerErrors = true }
)

// endTable: every way a claimed request ends, in both modes, with the
// store's answers to the calls the decision asked for.
var endTable = []struct {
	name string
	f    ended
	want verdict
}{
	// Lease mode: the handler's response.
	{"executed: complete, then deliver", lease,
		verdict{next: callComplete}},
	{"executed", with(lease, completed(nil)),
		verdict{deliver: true, outcome: OutcomeExecuted, status: 201}},
	{"executed with work", with(lease, work, completed(nil)),
		verdict{deliver: true, outcome: OutcomeExecuted, status: 201}},
	{"a 5xx is stored", with(lease, status(500)),
		verdict{next: callComplete}},
	{"released by Release", with(lease, released),
		verdict{release: true, deliver: true, outcome: OutcomeReleased, status: 201}},
	{"released: 429 never stored", with(lease, status(429)),
		verdict{release: true, deliver: true, outcome: OutcomeReleased, status: 429}},
	{"released: 5xx with ReleaseServerErrors", with(lease, status(503), releaseFiveX),
		verdict{release: true, deliver: true, outcome: OutcomeReleased, status: 503}},
	{"released: Release drops the work, even over the limit", with(lease, work, over, released),
		verdict{release: true, deliver: true, outcome: OutcomeReleased, status: 201}},
	{"released: panic", with(lease, panicked),
		verdict{release: true, outcome: OutcomeReleased, status: 500}},
	{"released: runtime.Goexit", with(lease, goexit),
		verdict{release: true, outcome: OutcomeReleased, status: 500, logs: []zapcore.Level{warnL}}},
	{"lease lost: the cancelled handler's 5xx is not stored", with(lease, leaseLost, status(503)),
		verdict{release: true, deliver: true, outcome: OutcomeLeaseLost, status: 503, logs: []zapcore.Level{warnL}}},
	{"lease lost, yet the handler succeeded: complete", with(lease, leaseLost),
		verdict{next: callComplete}},
	{"lease lost before completion: delivered, not run again", with(lease, completed(ErrNotOwner)),
		verdict{deliver: true, outcome: OutcomeLeaseLost, status: 201, logs: []zapcore.Level{warnL}}},

	// Lease mode: a step of unknown outcome (package step).
	{"step unknown: 503, key released with its steps, response neither sent nor stored", with(lease, stepUnknown(step.Reconcile)),
		verdict{release: true, problem: TypeStepOutcomeUnknown, retryAfter: 2, outcome: OutcomeStepUnknown, status: 503}},
	{"step unknown, parked: 503 without Retry-After", with(lease, stepUnknown(step.Park)),
		verdict{release: true, problem: TypeStepOutcomeUnknown, outcome: OutcomeStepUnknown, status: 503}},
	{"step unknown, before any other rule", with(lease, stepUnknown(step.Rerun), released, work, over, leaseLost, status(500)),
		verdict{release: true, problem: TypeStepOutcomeUnknown, retryAfter: 2, outcome: OutcomeStepUnknown, status: 503}},
	{"step unknown after the response streamed: nothing more to send", with(lease, stepUnknown(step.Reconcile), streamed),
		verdict{release: true, outcome: OutcomeStepUnknown, status: 503, logs: []zapcore.Level{errorL}}},
	{"step unknown, but a panic: released as abandoned", with(lease, stepUnknown(step.Reconcile), panicked),
		verdict{release: true, outcome: OutcomeReleased, status: 500}},

	// Lease mode: responses not retained.
	{"not stored: streamed, keep the status", with(lease, streamed),
		verdict{next: callKeepStatus}},
	{"not stored: over the limit, keep the status", with(lease, over),
		verdict{next: callKeepStatus}},
	{"not stored: status kept", with(lease, streamed, kept(nil)),
		verdict{deliver: true, outcome: OutcomeNotStored, status: 201, logs: []zapcore.Level{warnL}}},
	{"not stored: status kept, but the record is another's", with(lease, over, kept(ErrNotOwner)),
		verdict{deliver: true, outcome: OutcomeLeaseLost, status: 201, logs: []zapcore.Level{warnL, warnL}}},
	{"store error: status not kept either", with(lease, over, kept(errDown)),
		verdict{deliver: true, outcome: OutcomeStoreError, status: 201, logs: []zapcore.Level{errorL, warnL}}},
	{"not stored: completion failed, keep the status", with(lease, completed(errDown)),
		verdict{next: callKeepStatus, logs: []zapcore.Level{warnL}}},
	{"not stored: completion failed, status kept", with(lease, completed(errDown), kept(nil)),
		verdict{deliver: true, outcome: OutcomeNotStored, status: 201}},
	{"store error: completion failed, status not kept", with(lease, completed(errDown), kept(errDown)),
		verdict{deliver: true, outcome: OutcomeStoreError, status: 201, logs: []zapcore.Level{errorL}}},
	{"not stored: with work, discarded", with(lease, work, discarded),
		verdict{release: true, problem: TypeResponseTooLarge, outcome: OutcomeNotStored, status: 500, logs: []zapcore.Level{warnL}}},
	{"not stored: with work, over (headers)", with(lease, work, over),
		verdict{release: true, problem: TypeResponseTooLarge, outcome: OutcomeNotStored, status: 500, logs: []zapcore.Level{warnL}}},

	// Lease mode: the work's commit failed.
	{"not stored: with work, too large for the store", with(lease, work, completed(fmt.Errorf("x: %w", ErrTooLarge))),
		verdict{release: true, problem: TypeResponseTooLarge, outcome: OutcomeNotStored, status: 500, logs: []zapcore.Level{warnL}}},
	{"lease lost before the commit: 409, nothing to release", with(lease, work, completed(ErrNotOwner)),
		verdict{problem: TypeLeaseLost, retryAfter: 1, outcome: OutcomeLeaseLost, status: 409, logs: []zapcore.Level{warnL}}},
	{"commit failed: a write's condition", with(lease, work, completed(&ConditionError{Index: 1, Err: errDown})),
		verdict{release: true, problem: TypeWriteConflict, outcome: OutcomeCommitFailed, status: 409}},
	{"commit failed: outcome unknown", with(lease, work, completed(fmt.Errorf("x: %w", ErrOutcomeUnknown))),
		verdict{release: true, problem: TypeOutcomeUnknown, retryAfter: 1, outcome: OutcomeCommitFailed, status: 503, logs: []zapcore.Level{warnL}}},
	{"commit failed: timed out, outcome unknown", with(lease, work, completed(context.DeadlineExceeded)),
		verdict{release: true, problem: TypeOutcomeUnknown, retryAfter: 1, outcome: OutcomeCommitFailed, status: 503, logs: []zapcore.Level{warnL}}},
	{"commit failed: refused for good", with(lease, work, completed(errRefuse)),
		verdict{release: true, problem: TypeCommitRefused, outcome: OutcomeCommitFailed, status: 500, logs: []zapcore.Level{errorL}}},
	{"commit failed: work the store cannot commit", with(lease, work, completed(ErrWorkUnsupported)),
		verdict{release: true, problem: TypeCommitRefused, outcome: OutcomeCommitFailed, status: 500, logs: []zapcore.Level{errorL}}},
	{"commit failed", with(lease, work, completed(errDown)),
		verdict{release: true, problem: TypeCommitFailed, retryAfter: 1, outcome: OutcomeCommitFailed, status: 503, logs: []zapcore.Level{warnL}}},

	// Transactional mode.
	{"tx executed: complete and commit, then deliver", tx,
		verdict{next: callComplete}},
	{"tx executed", with(tx, committed(nil)),
		verdict{deliver: true, outcome: OutcomeExecuted, status: 201}},
	{"tx released by Release", with(tx, released),
		verdict{release: true, deliver: true, outcome: OutcomeReleased, status: 201}},
	{"tx released: a 5xx always rolls back", with(tx, status(500)),
		verdict{release: true, deliver: true, outcome: OutcomeReleased, status: 500}},
	{"tx released: 429", with(tx, status(429)),
		verdict{release: true, deliver: true, outcome: OutcomeReleased, status: 429}},
	{"tx released: Release, even over the limit", with(tx, over, released),
		verdict{release: true, deliver: true, outcome: OutcomeReleased, status: 201}},
	{"tx released: panic", with(tx, panicked),
		verdict{release: true, outcome: OutcomeReleased, status: 500}},
	{"tx released: runtime.Goexit", with(tx, goexit),
		verdict{release: true, outcome: OutcomeReleased, status: 500, logs: []zapcore.Level{warnL}}},
	{"tx not stored: discarded", with(tx, discarded),
		verdict{release: true, problem: TypeResponseTooLarge, outcome: OutcomeNotStored, status: 500, logs: []zapcore.Level{warnL}}},
	{"tx not stored: over (headers)", with(tx, over),
		verdict{release: true, problem: TypeResponseTooLarge, outcome: OutcomeNotStored, status: 500, logs: []zapcore.Level{warnL}}},
	{"tx not stored: too large for the store", with(tx, completed(fmt.Errorf("x: %w", ErrTooLarge))),
		verdict{release: true, problem: TypeResponseTooLarge, outcome: OutcomeNotStored, status: 500, logs: []zapcore.Level{warnL}}},
	{"tx lease lost: the claim was lost before the commit", with(tx, completed(ErrNotOwner)),
		verdict{release: true, problem: TypeLeaseLost, retryAfter: 1, outcome: OutcomeLeaseLost, status: 409, logs: []zapcore.Level{warnL}}},
	{"tx commit failed: COMMIT's outcome unknown", with(tx, committed(fmt.Errorf("x: %w", ErrOutcomeUnknown))),
		verdict{release: true, problem: TypeOutcomeUnknown, retryAfter: 1, outcome: OutcomeCommitFailed, status: 503, logs: []zapcore.Level{warnL}}},
	{"tx commit failed: COMMIT timed out", with(tx, committed(context.DeadlineExceeded)),
		verdict{release: true, problem: TypeOutcomeUnknown, retryAfter: 1, outcome: OutcomeCommitFailed, status: 503, logs: []zapcore.Level{warnL}}},
	{"tx commit failed: Complete timed out, nothing sent to commit", with(tx, completed(context.DeadlineExceeded)),
		verdict{release: true, problem: TypeCommitFailed, retryAfter: 1, outcome: OutcomeCommitFailed, status: 503, logs: []zapcore.Level{warnL}}},
	{"tx commit failed: refused for good", with(tx, committed(errRefuse)),
		verdict{release: true, problem: TypeCommitRefused, outcome: OutcomeCommitFailed, status: 500, logs: []zapcore.Level{errorL}}},
	{"tx commit failed", with(tx, committed(errDown)),
		verdict{release: true, problem: TypeCommitFailed, retryAfter: 1, outcome: OutcomeCommitFailed, status: 503, logs: []zapcore.Level{warnL}}},
}

// TestEndTable: what the middleware does when a claimed request's
// handler has ended, for every ending; and every outcome a claimed
// request can have appears in the table.
func TestEndTable(t *testing.T) {
	t.Parallel()
	seen := map[Outcome]bool{}
	for _, row := range endTable {
		a := decide(row.f, 1024)
		if got := verdictOf(a); !equalVerdict(got, row.want) {
			t.Errorf("%s:\n got %v\nwant %v", row.name, got, row.want)
		}
		if a.next == callNone {
			seen[a.outcome] = true
		}
	}
	for o := OutcomeExecuted; o < numOutcomes; o++ {
		if claimOnly := o == OutcomeReplayed || o == OutcomeInProgress || o == OutcomeKeyReused; !claimOnly && !seen[o] {
			t.Errorf("no row ends with %s", o)
		}
	}
}

// TestDecideEnds: a store call the decision asked for, once made, is never
// asked for again, whatever the store answered: the middleware's loop
// over decide ends.
func TestDecideEnds(t *testing.T) {
	t.Parallel()
	answers := []error{nil, errDown, ErrNotOwner, ErrTooLarge, ErrOutcomeUnknown, ErrPermanent, &ConditionError{}}
	for _, row := range endTable {
		for _, err := range answers {
			f := row.f
			for a := decide(f, 1024); a.next != callNone; a = decide(f, 1024) {
				switch {
				case a.next == callComplete && !f.completed:
					f.completed, f.completeErr = true, err
				case a.next == callKeepStatus && !f.keptStatus:
					f.keptStatus, f.keptErr = true, err
				default:
					t.Fatalf("%s with %v: call %d asked for again", row.name, err, a.next)
				}
			}
		}
	}
}

func equalVerdict(a, b verdict) bool {
	return reflect.DeepEqual(a, b)
}
