package idempotency

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Problem types: the "type" of each application/problem+json (RFC 9457)
// the middleware answers with.
const (
	// TypeKeyMissing: 400, the request has no Idempotency-Key.
	TypeKeyMissing = "urn:sqsonce:idempotency:key-missing"
	// TypeKeyInvalid: 400, the key is not 1–255 visible ASCII characters,
	// bare, or printable ones in a quoted string (or the header appears
	// twice).
	TypeKeyInvalid = "urn:sqsonce:idempotency:key-invalid"
	// TypeScope: 401, Config.ScopeFunc could not name the caller.
	TypeScope = "urn:sqsonce:idempotency:scope"
	// TypeBodyTooLarge: 413, the body is over Config.MaxBodyBytes.
	TypeBodyTooLarge = "urn:sqsonce:idempotency:body-too-large"
	// TypeBodyUnreadable: 400, reading the body failed.
	TypeBodyUnreadable = "urn:sqsonce:idempotency:body-unreadable"
	// TypeBodyInvalid: 400, Config.FingerprintFunc refused the body; the
	// key was not taken.
	TypeBodyInvalid = "urn:sqsonce:idempotency:body-invalid"
	// TypeKeyReused: 422, the key was used for a different request.
	TypeKeyReused = "urn:sqsonce:idempotency:key-reused"
	// TypeInProgress: 409 with Retry-After, the first request with this
	// key holds it. In the lease mode that request may be running or may
	// have stopped (its process died): Retry-After is the seconds left on
	// its stored lease, after which a retry gets its response or, if it
	// stopped, runs. In the transactional mode (Config.BeginTxFunc) it is
	// running: a stopped one has freed the key already.
	TypeInProgress = "urn:sqsonce:idempotency:in-progress"
	// TypeStoreUnavailable: 503 with Retry-After, the store did not answer
	// the claim; nothing ran.
	TypeStoreUnavailable = "urn:sqsonce:idempotency:store-unavailable"
	// TypeCommitFailed: 503 with Retry-After, the transactional completion
	// failed; nothing was committed and the key was released.
	TypeCommitFailed = "urn:sqsonce:idempotency:commit-failed"
	// TypeWriteConflict: 409, a condition on one of the handler's own
	// writes failed at commit; nothing was committed, the key was released.
	TypeWriteConflict = "urn:sqsonce:idempotency:write-conflict"
	// TypeLeaseLost: 409 with Retry-After, the request's lease was taken
	// over before its transactional completion; nothing was committed.
	TypeLeaseLost = "urn:sqsonce:idempotency:lease-lost"
	// TypeCommitRefused: 500 without Retry-After, the store refused the
	// handler's writes for a reason no retry can fix (more writes than one
	// transaction takes, an invalid item, a store that cannot commit
	// writes); nothing was committed and the key was released.
	TypeCommitRefused = "urn:sqsonce:idempotency:commit-refused"
	// TypeOutcomeUnknown: 503 with Retry-After, the commit was sent but
	// its answer was lost: it may have committed. A retry with the same
	// key gets the stored response if it did, and runs if it did not.
	TypeOutcomeUnknown = "urn:sqsonce:idempotency:outcome-unknown"
	// TypeStepOutcomeUnknown: 503, a step of the request (package step)
	// has an unknown outcome in this attempt (a call whose answer was
	// lost, a reconcile that could not tell, or a parked step): the
	// handler's response is neither sent nor stored, and the key is
	// released with the request's steps kept. With Retry-After (2 s) the
	// retry with the same key reconciles or reruns the step and carries
	// the request on; without (a parked step) retries get the same answer
	// until an operator resolves the step.
	TypeStepOutcomeUnknown = "urn:sqsonce:idempotency:step-outcome-unknown"
	// TypeNotRetained: a replay of a request that ran but whose response
	// could not be stored (too large, or its completion failed): the
	// original status, Idempotent-Replayed: true, and this problem in
	// place of the body. The request does not run again.
	TypeNotRetained = "urn:sqsonce:idempotency:response-not-retained"
	// TypeResponseTooLarge: 500, a transactional handler's response is over
	// Config.MaxResponseBytes, so it could not be stored with its writes;
	// nothing was committed and the key was released.
	TypeResponseTooLarge = "urn:sqsonce:idempotency:response-too-large"
)

// ProblemContentType is the media type of the middleware's errors.
const ProblemContentType = "application/problem+json"

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// writeProblem answers with a problem; retryAfter > 0 adds Retry-After in
// whole seconds.
func writeProblem(w http.ResponseWriter, status int, typ, detail string, retryAfter int) {
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail})
	_, _ = w.Write(append(b, '\n'))
}
