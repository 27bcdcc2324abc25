package step

import "errors"

// Unresolved is a step whose outcome is unknown, as a store lists it for a
// person to resolve (dedupe's StepStore.Unknown).
type Unresolved struct {
	// Key is the record's key as the store was given it (a message's
	// dedupe key); a key too long to store is listed as its hash,
	// "sha256:…", which resolves it too.
	Key string
	// Step is the step's name, Record its recorded state.
	Step   string
	Record Record
	// Held is true while an attempt holds the record under a live lease:
	// it cannot be resolved until that lease ends.
	Held bool
}

// Errors of a store's Resolve.
var (
	// ErrNotUnknown: the record has no step of that name whose outcome is
	// unknown (none, or it is done or not done already).
	ErrNotUnknown = errors.New("step: no step of that name with an unknown outcome in the record")
	// ErrHeld: an attempt holds the record under a live lease; resolve
	// the step after it ends.
	ErrHeld = errors.New("step: the record is held by a running attempt; try again once its lease ends")
)

// Resolution returns the record of a person's decision on a step of
// unknown outcome r: applied (done, with no result) or not applied (the
// next attempt runs it).
func Resolution(r Record, applied bool) Record {
	out := Record{Status: StatusNotDone, Resolved: ResolvedNotApplied, Reason: r.Reason}
	if applied {
		out.Status, out.Resolved = StatusDone, ResolvedApplied
	}
	return out
}

// Resolvable reports whether r is a state a person may resolve: unknown,
// or started (its attempt stopped).
func Resolvable(r Record) bool { return r.Status == StatusUnknown || r.Status == StatusStarted }
