package leasetest

import (
	"bytes"
	"errors"
	"time"

	"github.com/sqsonce/sqsonce/step"
)

// The step cases: a record holds its handler's steps (package step); a
// takeover and a retry after a release resume from them, a fresh record
// has none, every write of them is fenced, and a person can list and
// resolve a step of unknown outcome.
var stepCases = []struct {
	name string
	run  func(e *Env)
}{
	{"StepsRoundTrip", stepsRoundTrip},
	{"StepsSurviveTakeover", stepsSurviveTakeover},
	{"StepsFenced", stepsFenced},
	{"ReleaseKeepsSteps", releaseKeepsSteps},
	{"FreshRecordHasNoSteps", freshRecordHasNoSteps},
	{"UnknownListedAndResolved", unknownListedAndResolved},
}

// steps is the step store under test.
func (e *Env) steps() StepStore { return e.Store.(StepStore) }

// SaveSteps saves steps in the claim holding token and fails the test on
// an error.
func (e *Env) SaveSteps(token string, steps map[string]step.Record) {
	e.T.Helper()
	if err := e.steps().SaveSteps(e.Ctx, e.Key, token, steps); err != nil {
		e.T.Fatalf("SaveSteps: %v", err)
	}
}

// at is a step time as a store keeps it (milliseconds are enough).
func (e *Env) at() time.Time { return e.Clock.Now().UTC().Truncate(time.Millisecond) }

// sameSteps fails the test unless got holds exactly want.
func (e *Env) sameSteps(what string, got, want map[string]step.Record) {
	e.T.Helper()
	if len(got) != len(want) {
		e.T.Fatalf("%s: steps %+v, want %+v", what, got, want)
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || g.Status != w.Status || !bytes.Equal(g.Result, w.Result) || g.Reason != w.Reason ||
			g.Resolved != w.Resolved || !g.At.Equal(w.At) {
			e.T.Fatalf("%s: step %q = %+v, want %+v", what, name, g, w)
		}
	}
}

// stepsRoundTrip: what a step records comes back as written, binary
// results, text in any script and times to the millisecond included.
func stepsRoundTrip(e *Env) {
	c := e.Claim(FP, Claimed)
	if len(c.Steps) != 0 {
		e.T.Fatalf("a fresh claim has steps %+v", c.Steps)
	}
	want := map[string]step.Record{
		"charge":     {Status: step.StatusDone, Result: []byte("{\"id\":\"ch_1\"}\x00\xff"), At: e.at()},
		"email":      {Status: step.StatusUnknown, Reason: "read tcp: connection reset by peer — 接続", At: e.at()},
		"notify:sms": {Status: step.StatusStarted, At: e.at()},
		"refund":     {Status: step.StatusNotDone, Reason: "declined", Resolved: step.ResolvedNotApplied, At: e.at()},
		"empty":      {Status: step.StatusDone, Result: []byte{}, At: e.at()},
	}
	e.SaveSteps(c.Token, want)
	// Saved again, replaced whole.
	want["charge"] = step.Record{Status: step.StatusDone, Result: []byte("ch_2"), At: e.at()}
	e.SaveSteps(c.Token, want)
	e.Clock.Advance(Lease + time.Second)
	got := e.Claim(FP, Claimed)
	// An empty result may come back as none.
	if r := got.Steps["empty"]; len(r.Result) == 0 {
		r.Result = []byte{}
		got.Steps["empty"] = r
	}
	e.sameSteps("after a takeover", got.Steps, want)
}

// stepsSurviveTakeover: the owner died between "started" and "done"; the
// next owner finds the step started, and the dead owner writes nothing.
func stepsSurviveTakeover(e *Env) {
	old := e.Claim(FP, Claimed)
	started := map[string]step.Record{"charge": {Status: step.StatusStarted, At: e.at()}}
	e.SaveSteps(old.Token, started)
	e.Claim(FP, InProgress)
	e.Clock.Advance(Lease + time.Second)
	cur := e.Claim(FP, Claimed)
	e.sameSteps("the takeover", cur.Steps, started)
	done := map[string]step.Record{"charge": {Status: step.StatusDone, Result: []byte("late"), At: e.at()}}
	e.NotOwner("SaveSteps by the dead owner", e.steps().SaveSteps(e.Ctx, e.Key, old.Token, done))
	// A second takeover sees the new owner's steps.
	reconciled := map[string]step.Record{"charge": {Status: step.StatusDone, Result: []byte("reconciled"), At: e.at()}}
	e.SaveSteps(cur.Token, reconciled)
	e.Clock.Advance(Lease + time.Second)
	e.sameSteps("the second takeover", e.Claim(FP, Claimed).Steps, reconciled)
}

// stepsFenced: only the claim's token writes steps, and never to a
// completed record.
func stepsFenced(e *Env) {
	s := map[string]step.Record{"charge": {Status: step.StatusStarted, At: e.at()}}
	e.NotOwner("SaveSteps of an absent key", e.steps().SaveSteps(e.Ctx, e.Key, "nope", s))
	c := e.Claim(FP, Claimed)
	e.NotOwner("SaveSteps with a wrong token", e.steps().SaveSteps(e.Ctx, e.Key, "nope", s))
	e.SaveSteps(c.Token, s)
	e.Complete(c.Token, "done")
	e.NotOwner("SaveSteps after Complete", e.steps().SaveSteps(e.Ctx, e.Key, c.Token, s))
	e.Completed(FP, "done")
}

// releaseKeepsSteps: a handler that failed after a step gives its key
// back with the steps kept: the retry claims at once and resumes; another
// body is key reuse (the steps' effects are the first body's).
func releaseKeepsSteps(e *Env) {
	c := e.Claim(FP, Claimed)
	done := map[string]step.Record{"charge": {Status: step.StatusDone, Result: []byte("ch_1"), At: e.at()}}
	e.SaveSteps(c.Token, done)
	if err := e.Store.Release(e.Ctx, e.Key, c.Token); err != nil {
		e.T.Fatalf("Release: %v", err)
	}
	e.NotOwner("SaveSteps after Release", e.steps().SaveSteps(e.Ctx, e.Key, c.Token, done))
	e.Claim(FPB, KeyReused)
	next := e.Claim(FP, Claimed) // no waiting for the lease
	e.sameSteps("the claim after Release", next.Steps, done)
	e.Complete(next.Token, "resumed")
	e.Completed(FP, "resumed")
}

// freshRecordHasNoSteps: an expired record's steps are not a new
// message's.
func freshRecordHasNoSteps(e *Env) {
	c := e.Claim(FP, Claimed)
	e.SaveSteps(c.Token, map[string]step.Record{"charge": {Status: step.StatusUnknown, Reason: "lost", At: e.at()}})
	e.Clock.Advance(farFuture)
	if got := e.Claim(FP, Claimed); len(got.Steps) != 0 {
		e.T.Fatalf("a claim of an expired record got its steps %+v", got.Steps)
	}
}

// unknownListedAndResolved: a step of unknown outcome is listed for a
// person, who resolves it once the record's lease has ended; the next
// claim finds the decision.
func unknownListedAndResolved(e *Env) {
	ctx, s := e.Ctx, e.steps()
	for _, applied := range []bool{true, false} {
		k := *e
		k.Key = e.Key + map[bool]string{true: "-applied", false: "-not-applied"}[applied]
		if err := s.Resolve(ctx, k.Key, "charge", applied); !errors.Is(err, step.ErrNotUnknown) {
			k.T.Fatalf("Resolve of an absent record: %v, want ErrNotUnknown", err)
		}
		c := k.Claim(FP, Claimed)
		unknown := step.Record{Status: step.StatusUnknown, Reason: "EOF", At: k.at()}
		k.SaveSteps(c.Token, map[string]step.Record{"debit": {Status: step.StatusDone, At: k.at()}, "charge": unknown})
		listed := func() (step.Unresolved, bool) {
			k.T.Helper()
			all, err := s.Unknown(ctx, 0)
			if err != nil {
				k.T.Fatalf("Unknown: %v", err)
			}
			for _, u := range all {
				if u.Key == k.Key {
					return u, true
				}
			}
			return step.Unresolved{}, false
		}
		u, ok := listed()
		if !ok || u.Step != "charge" || u.Record.Status != step.StatusUnknown || u.Record.Reason != "EOF" || !u.Held {
			k.T.Fatalf("Unknown lists %+v (found: %v), want step charge, unknown, held", u, ok)
		}
		if err := s.Resolve(ctx, k.Key, "charge", applied); !errors.Is(err, step.ErrHeld) {
			k.T.Fatalf("Resolve while the lease is live: %v, want ErrHeld", err)
		}
		if err := k.Store.Release(ctx, k.Key, c.Token); err != nil {
			k.T.Fatalf("Release: %v", err)
		}
		if u, ok := listed(); !ok || u.Held {
			k.T.Fatalf("after Release Unknown lists %+v (found %v), want it not held", u, ok)
		}
		if err := s.Resolve(ctx, k.Key, "debit", applied); !errors.Is(err, step.ErrNotUnknown) {
			k.T.Fatalf("Resolve of a done step: %v, want ErrNotUnknown", err)
		}
		if err := s.Resolve(ctx, k.Key, "charge", applied); err != nil {
			k.T.Fatalf("Resolve: %v", err)
		}
		if err := s.Resolve(ctx, k.Key, "charge", applied); !errors.Is(err, step.ErrNotUnknown) {
			k.T.Fatalf("Resolve twice: %v, want ErrNotUnknown", err)
		}
		if _, ok := listed(); ok {
			k.T.Fatalf("a resolved step is still listed")
		}
		got := k.Claim(FP, Claimed).Steps["charge"]
		want := step.Resolution(unknown, applied)
		if got.Status != want.Status || got.Resolved != want.Resolved || len(got.Result) != 0 {
			k.T.Fatalf("resolved step %+v, want %+v", got, want)
		}
	}
}
