package step

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// Limits of what a step records.
const (
	// MaxResultBytes is the largest result a step may record: the result
	// lives in the dedupe or idempotency record (a DynamoDB item holds at
	// most 400 KB, and is read back by every claim of its key).
	MaxResultBytes = 4 << 10
	// MaxNameBytes is the longest step name.
	MaxNameBytes = 64
	// maxReasonBytes bounds the reason recorded with an unknown outcome.
	maxReasonBytes = 512
	// saveTimeout bounds the save of a step's outcome once its function
	// returned: it is made even when the handler's context has ended (the
	// effect happened; only the record can say so).
	saveTimeout = 10 * time.Second
)

// Policy is what the next attempt does with a step whose outcome is
// unknown.
type Policy int

const (
	// Reconcile asks the downstream (Options.ReconcileFunc) whether the
	// step's effect happened.
	Reconcile Policy = iota + 1
	// Rerun runs the step again: safe only when the downstream dedupes by
	// a key the step passes to it.
	Rerun
	// Park leaves the decision to a person: the message is dead-lettered
	// with class outcome_unknown (an HTTP request answers 503) until the
	// step is resolved as applied or not applied.
	Park
)

// String returns the policy's name: reconcile, rerun or park.
func (p Policy) String() string {
	switch p {
	case Reconcile:
		return "reconcile"
	case Rerun:
		return "rerun"
	case Park:
		return "park"
	}
	return fmt.Sprintf("policy(%d)", int(p))
}

// ParsePolicy reads a policy's name (as [Policy.String] writes it).
func ParsePolicy(s string) (Policy, error) {
	for _, p := range []Policy{Reconcile, Rerun, Park} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("step: policy %q: use reconcile, rerun or park", s)
}

// Status is a step's state as recorded.
type Status string

// The states of a step. A step with no record has not started.
const (
	// StatusStarted: its function was called; what it did is not known
	// yet. Found by a later attempt, the outcome is unknown (the attempt
	// that started it stopped).
	StatusStarted Status = "started"
	// StatusDone: it happened; Record.Result is its result.
	StatusDone Status = "done"
	// StatusUnknown: its function failed in a way that leaves its effect
	// unknown (Record.Reason says how), or reconciling could not tell.
	StatusUnknown Status = "unknown"
	// StatusNotDone: it did not happen (its function failed with a known
	// failure, or a person resolved it as not applied): the next attempt
	// runs it.
	StatusNotDone Status = "not_done"
)

// Resolutions a person records (Record.Resolved).
const (
	ResolvedApplied    = "applied"
	ResolvedNotApplied = "not-applied"
)

// Record is one step's state in the dedupe or idempotency record.
type Record struct {
	Status Status `json:"status"`
	// Result is the step's result (StatusDone), at most MaxResultBytes.
	Result []byte `json:"result,omitempty"`
	// Reason is why the outcome is unknown or the step failed.
	Reason string `json:"reason,omitempty"`
	// At is when the state was recorded.
	At time.Time `json:"at"`
	// Resolved is set when a person decided the state: ResolvedApplied
	// or ResolvedNotApplied.
	Resolved string `json:"resolved,omitempty"`
}

// Recorder reads and writes the steps of one claimed record. The
// middlewares put one in the handler's context ([WithRecorder]); a
// handler only calls [Run].
type Recorder interface {
	// Load returns the recorded state of step name; ok=false when none.
	Load(name string) (r Record, ok bool)
	// Save records step name's state durably, fenced by the claim: an
	// owner whose claim was taken over gets an error and writes nothing.
	Save(ctx context.Context, name string, r Record) error
}

// Observer is implemented by a Recorder that counts step events (the
// middlewares' recorders feed their metrics and observers with them).
type Observer interface {
	StepEvent(e Event)
}

// Event kinds: the values of Event.Kind and of the step metrics' event
// attribute.
const (
	// EventUnknown: a step's outcome became unknown (its function failed
	// so), or an attempt found it started by one that stopped.
	EventUnknown = "unknown"
	// EventReconcileFound: reconciling found the effect: recorded done.
	EventReconcileFound = "reconcile_found"
	// EventReconcileNotFound: reconciling found no effect: the step runs.
	EventReconcileNotFound = "reconcile_not_found"
	// EventReconcileStillUnknown: reconciling could not tell: retried
	// later.
	EventReconcileStillUnknown = "reconcile_still_unknown"
	// EventParked: the step waits for a person (policy Park).
	EventParked = "parked"
	// EventRerun: a step of unknown outcome runs again (policy Rerun).
	EventRerun = "rerun"
)

// EventKinds lists every Event.Kind.
var EventKinds = []string{EventUnknown, EventReconcileFound, EventReconcileNotFound, EventReconcileStillUnknown, EventParked, EventRerun}

// Event is one thing that happened to a step.
type Event struct {
	// Step is the step's name.
	Step string
	// Kind is one of the Event* constants.
	Kind string
	// Policy is the step's policy.
	Policy Policy
	// Err is the step's *UnknownError for EventUnknown,
	// EventReconcileStillUnknown and EventParked.
	Err error
	// Fails is true when Run returns Err: this attempt ends on the step
	// (false for an unknown outcome found and then decided by the policy).
	Fails bool
}

type recorderKey struct{}

// WithRecorder returns ctx carrying r: [Run] in a handler under ctx
// records its steps with r.
func WithRecorder(ctx context.Context, r Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// RecorderFrom returns the Recorder of ctx, nil when there is none.
func RecorderFrom(ctx context.Context) Recorder {
	r, _ := ctx.Value(recorderKey{}).(Recorder)
	return r
}

// ErrNoRecorder is returned by Run when its context has no recorder: the
// handler does not run under dedupe.Middleware or the idempotency
// middleware's lease mode, or their store does not record steps.
var ErrNoRecorder = errors.New("step: no recorder in the context: run the handler under dedupe.Middleware (or the idempotency middleware without BeginTxFunc) with a store that records steps")

// Options configures one step.
type Options struct {
	// Policy is what the next attempt does when the step's outcome is
	// unknown. Defaults to Reconcile when ReconcileFunc is set, else Park:
	// nothing runs twice unless the step says it may.
	Policy Policy
	// ReconcileFunc asks the downstream whether the step's effect
	// happened: [Done] with the result, [NotDone], or [StillUnknown]. An
	// error means still unknown. Required with Policy Reconcile.
	ReconcileFunc func(ctx context.Context) (Reconciliation, error)
	// Timeout bounds the step's function: its context ends after it, and
	// an error then leaves the outcome unknown. Defaults to 0: the
	// handler's own context only.
	Timeout time.Duration
	// UnknownFunc decides which errors of the step's function leave its
	// outcome unknown. Defaults to [IsUnknown].
	UnknownFunc func(error) bool
}

// policy is o's policy after defaults, or an error for a bad one.
func (o Options) policy() (Policy, error) {
	switch o.Policy {
	case 0:
		if o.ReconcileFunc != nil {
			return Reconcile, nil
		}
		return Park, nil
	case Reconcile:
		if o.ReconcileFunc == nil {
			return 0, errors.New("step: Options.ReconcileFunc is required with Policy Reconcile")
		}
		return Reconcile, nil
	case Rerun, Park:
		return o.Policy, nil
	}
	return 0, fmt.Errorf("step: Options.Policy %d is not Reconcile, Rerun or Park", int(o.Policy))
}

// Reconciliation is the answer of an Options.ReconcileFunc.
type Reconciliation struct {
	status Status
	result []byte
	reason string
}

// Done answers that the step's effect happened, with the result the step
// would have returned.
func Done(result []byte) Reconciliation { return Reconciliation{status: StatusDone, result: result} }

// NotDone answers that the step's effect did not happen: it runs now.
func NotDone() Reconciliation { return Reconciliation{status: StatusNotDone} }

// StillUnknown answers that the downstream cannot tell yet: the attempt
// fails and a later one reconciles again.
func StillUnknown(reason string) Reconciliation {
	return Reconciliation{status: StatusUnknown, reason: reason}
}

// UnknownError is Run's error for a step whose outcome is unknown in this
// attempt. Under the consumer it is a transient failure (retried with
// backoff; the next attempt reconciles or reruns), except with policy
// Park: then its FailureClass is outcome_unknown and the message is
// dead-lettered with the step's name.
type UnknownError struct {
	// Step is the step's name.
	Step string
	// Policy is the step's policy.
	Policy Policy
	// Reason says why the outcome is unknown.
	Reason string
	// Err is the step function's error, when this attempt ran it.
	Err error
}

// ClassOutcomeUnknown is the dead-letter class of a parked step
// (deadletter.ClassOutcomeUnknown).
const ClassOutcomeUnknown = "outcome_unknown"

func (e *UnknownError) Error() string {
	return fmt.Sprintf("step %q: outcome unknown (policy %s): %s", e.Step, e.Policy, e.Reason)
}

func (e *UnknownError) Unwrap() error { return e.Err }

// FailureClass is the dead-letter class: outcome_unknown with policy
// Park, else none (a transient failure).
func (e *UnknownError) FailureClass() string {
	if e.Policy == Park {
		return ClassOutcomeUnknown
	}
	return ""
}

// FailureStep is the step's name, recorded in a dead letter's failure.
func (e *UnknownError) FailureStep() string { return e.Step }

// checkName rejects a name a store could not hold as written.
func checkName(name string) error {
	if name == "" || len(name) > MaxNameBytes {
		return fmt.Errorf("step: name %q: use 1 to %d bytes", name, MaxNameBytes)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == ':') {
			return fmt.Errorf("step: name %q: use letters, digits and _-.: only", name)
		}
	}
	return nil
}

// Run runs the step name of the handler whose context is ctx, once:
//
//   - Recorded done: fn does not run; the recorded result is returned.
//   - Recorded started or unknown (an earlier attempt's outcome is
//     unknown): the policy decides (see the package doc); reconciled as
//     done, its result is recorded and returned without running fn.
//   - Otherwise (no record, or not done): the step is recorded started,
//     fn runs, and its outcome is recorded: done with fn's result, unknown
//     when fn's error leaves it unknown (Options.UnknownFunc), not done on
//     any other error, which is returned as fn returned it (wrapped with
//     the step's name), so that the handler's classification applies.
//
// An unknown outcome is returned as an [*UnknownError]. A step whose
// outcome could not be recorded after fn succeeded returns an error: its
// record says started, and the next attempt treats it as unknown.
func Run(ctx context.Context, name string, opts Options, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	policy, err := opts.policy()
	if err != nil {
		return nil, err
	}
	rec := RecorderFrom(ctx)
	if rec == nil {
		return nil, fmt.Errorf("step %q: %w", name, ErrNoRecorder)
	}
	s := &run{rec: rec, name: name, opts: opts, policy: policy}
	r, ok := rec.Load(name)
	if !ok {
		return s.do(ctx, fn)
	}
	switch r.Status {
	case StatusDone:
		return bytes.Clone(r.Result), nil
	case StatusStarted, StatusUnknown:
	default: // StatusNotDone, or a state this version does not know
		return s.do(ctx, fn)
	}
	reason := r.Reason
	if r.Status == StatusStarted {
		reason = "an earlier attempt started the step and stopped before recording its outcome"
		s.event(EventUnknown, &UnknownError{Step: name, Policy: policy, Reason: reason}, policy == Park)
	}
	switch policy {
	case Rerun:
		s.event(EventRerun, nil, false)
		return s.do(ctx, fn)
	case Park:
		u := &UnknownError{Step: name, Policy: Park, Reason: reason}
		if r.Status == StatusStarted {
			// Recorded unknown, so that the step is listed for a person.
			_ = s.save(ctx, Record{Status: StatusUnknown, Reason: reason})
		}
		s.event(EventParked, u, true)
		return nil, u
	}
	return s.reconcile(ctx, r, reason, fn)
}

// run is one call of Run.
type run struct {
	rec    Recorder
	name   string
	opts   Options
	policy Policy
}

// event reports an event to the recorder, when it counts them; fails
// says that Run returns err.
func (s *run) event(kind string, err error, fails bool) {
	if o, ok := s.rec.(Observer); ok {
		o.StepEvent(Event{Step: s.name, Kind: kind, Policy: s.policy, Err: err, Fails: fails})
	}
}

// save records the step's state, within saveTimeout even when ctx has
// ended.
func (s *run) save(ctx context.Context, r Record) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	r.At = time.Now().UTC()
	r.Result = bytes.Clone(r.Result) // the record's own: the caller may change what it returned
	if err := s.rec.Save(sctx, s.name, r); err != nil {
		return fmt.Errorf("step %q: record %s: %w", s.name, r.Status, err)
	}
	return nil
}

// reconcile asks the downstream about a step of unknown outcome.
func (s *run) reconcile(ctx context.Context, r Record, reason string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	ans, err := s.opts.ReconcileFunc(ctx)
	if err != nil {
		ans = StillUnknown("reconcile: " + err.Error())
	}
	switch ans.status {
	case StatusDone:
		if len(ans.result) > MaxResultBytes {
			return nil, fmt.Errorf("step %q: reconciled result of %d bytes is over MaxResultBytes (%d)", s.name, len(ans.result), MaxResultBytes)
		}
		if err := s.save(ctx, Record{Status: StatusDone, Result: ans.result, Reason: "reconciled"}); err != nil {
			return nil, err // still started or unknown: the next attempt reconciles again
		}
		s.event(EventReconcileFound, nil, false)
		return bytes.Clone(ans.result), nil
	case StatusNotDone:
		s.event(EventReconcileNotFound, nil, false)
		return s.do(ctx, fn)
	}
	why := cut(ans.reason)
	if why == "" {
		why = "reconcile could not tell"
	}
	u := &UnknownError{Step: s.name, Policy: s.policy, Reason: why + " (first: " + cut(reason) + ")", Err: err}
	if r.Status == StatusStarted {
		// Recorded unknown, so that the step is listed for a person.
		_ = s.save(ctx, Record{Status: StatusUnknown, Reason: reason})
	}
	s.event(EventReconcileStillUnknown, u, true)
	return nil, u
}

// do runs fn and records its outcome.
func (s *run) do(ctx context.Context, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("step %q: not started: %w", s.name, context.Cause(ctx))
	}
	if err := s.save(ctx, Record{Status: StatusStarted}); err != nil {
		return nil, err // nothing ran
	}
	fctx := ctx
	if s.opts.Timeout > 0 {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	result, err := fn(fctx)
	if err == nil && len(result) > MaxResultBytes {
		err = Unknown(fmt.Errorf("step %q: result of %d bytes is over MaxResultBytes (%d): it cannot be recorded", s.name, len(result), MaxResultBytes))
	}
	if err == nil {
		if err := s.save(ctx, Record{Status: StatusDone, Result: result}); err != nil {
			return nil, fmt.Errorf("%w (the step's effect happened; the next attempt treats its outcome as unknown)", err)
		}
		return result, nil
	}
	unknown := s.opts.UnknownFunc
	if unknown == nil {
		unknown = IsUnknown
	}
	if unknown(err) || (fctx.Err() != nil && ctx.Err() == nil && !isNotApplied(err)) {
		u := &UnknownError{Step: s.name, Policy: s.policy, Reason: cut(err.Error()), Err: err}
		// A failed save leaves it started: unknown all the same.
		_ = s.save(ctx, Record{Status: StatusUnknown, Reason: u.Reason})
		s.event(EventUnknown, u, true)
		if s.policy == Park {
			s.event(EventParked, u, true)
		}
		return nil, u
	}
	// A failed save leaves it started: the next attempt finds out.
	_ = s.save(ctx, Record{Status: StatusNotDone, Reason: cut(err.Error())})
	return nil, fmt.Errorf("step %q: %w", s.name, err)
}

// cut bounds a reason, on a rune boundary.
func cut(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	n := maxReasonBytes
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
