package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sqsonce/sqsonce/step"
)

// Store keeps one record per (scope, key) with the record model of package
// dedupe (docs/architecture.md): IN_PROGRESS under a lease, fenced by the
// claim's token, then COMPLETED with the stored response. A record expires
// at its expires_at, judged by the store's clock on every read.
//
// Keys reach a Store already hashed (see [RecordKey]): a Store never sees
// the client's key or the caller's scope.
//
// Implementations must pass
// [github.com/sqsonce/sqsonce/idempotency/idemtest.Run].
type Store interface {
	// Claim tries to take key for lease. It succeeds (Status Claimed, with
	// a fresh Token) when there is no record, the record has expired, or
	// the record is IN_PROGRESS with a lease that has ended and the same
	// fingerprint (a takeover: the previous owner crashed). Otherwise it
	// reports KeyReused (the record's fingerprint differs; checked first,
	// also when the lease has ended: the crashed attempt's effects are
	// unknown, so the key stays its request's until the record expires),
	// Completed (with the stored Response) or InProgress (with the owner's
	// LeaseUntil).
	Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error)
	// Extend moves the lease of the claim holding token to now+lease.
	Extend(ctx context.Context, key, token string, lease time.Duration) error
	// Complete marks the claim holding token COMPLETED with c.Response,
	// committing c.Work in the same transaction: all or nothing. A store
	// that cannot commit work (or work of that type) returns an error
	// wrapping [ErrWorkUnsupported] when given some, and commits nothing.
	// Its errors wrap [ErrPermanent] when no retry can succeed and
	// [ErrOutcomeUnknown] when the write may have been applied.
	// c.Response.NotRetained is stored with the record and given back by
	// Claim.
	Complete(ctx context.Context, key, token string, c Completion) error
	// Release deletes the IN_PROGRESS claim holding token, so the next claim
	// of key runs at once. A record that holds steps (see [StepStore]) is
	// kept instead, with its lease ended: the next claim of the same
	// request takes it over at once and gets its steps back.
	Release(ctx context.Context, key, token string) error
}

// StepStore is a [Store] that records a handler's steps (package step) in
// its records, so that a request whose lease was taken over after its
// owner died, or that is retried after a step's outcome was unknown,
// resumes after its last completed step. The middleware's lease mode puts
// a step recorder in the handler's context when its store is one. Every
// store of sqsonce is (memory, DynamoDB, PostgreSQL).
type StepStore interface {
	Store
	// SaveSteps replaces the steps recorded in the claim holding token,
	// fenced as Extend is ([ErrNotOwner]). A Claim that takes the record
	// over returns them in Claim.Steps.
	SaveSteps(ctx context.Context, key, token string, steps map[string]step.Record) error
	// Unknown lists up to limit (0: all) records with a step whose
	// outcome is unknown, for a person (a DynamoDB Scan: an operator's
	// call). Keys are record keys ([RecordKey]).
	Unknown(ctx context.Context, limit int) ([]step.Unresolved, error)
	// Resolve records a person's decision on step name of key's record:
	// applied (done, without a result) or not applied (the next attempt
	// runs it); see dedupe.StepStore.Resolve.
	Resolve(ctx context.Context, key, name string, applied bool) error
}

// Lookuper is a [Store] that reads a record without changing it: for
// people (an operator's console), never to decide a request. Every Store
// of this module is one.
type Lookuper interface {
	// Lookup returns the record of key (a [RecordKey]), or an error
	// wrapping [ErrNoRecord] when there is none or only an expired one.
	Lookup(ctx context.Context, key string) (Record, error)
}

// ErrNoRecord is the error of [Lookuper.Lookup] for a key without a live
// record: never claimed, released, or expired.
var ErrNoRecord = errors.New("idempotency: no record for that key")

// Record is a key record as stored, read by [Lookuper.Lookup].
type Record struct {
	// Status is StatusInProgress or StatusCompleted.
	Status string
	// Fingerprint is the hash of the request that claimed the key.
	Fingerprint string
	// LeaseUntil is when the owner's lease ends (IN_PROGRESS only).
	LeaseUntil time.Time
	// ExpiresAt is when the record expires: a retry after it runs again.
	ExpiresAt time.Time
	// Response is the stored response (COMPLETED only).
	Response *Response
	// Steps are the steps the record holds (package step), nil for none.
	Steps map[string]step.Record
}

// Status is the result of a [Store.Claim].
type Status int

const (
	// Claimed: the caller owns the key until its lease ends.
	Claimed Status = iota + 1
	// Completed: the key's request ran; Claim.Response is its response.
	Completed
	// InProgress: another owner holds the key until Claim.LeaseUntil.
	InProgress
	// KeyReused: the key's record was written for a different request.
	KeyReused
)

// String returns the status as logged.
func (s Status) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Completed:
		return "completed"
	case InProgress:
		return "in_progress"
	case KeyReused:
		return "key_reused"
	}
	return "unknown"
}

// Claim is the answer to [Store.Claim].
type Claim struct {
	Status Status
	// Token fences the claim (Claimed only): pass it to Extend, Complete
	// and Release.
	Token string
	// LeaseUntil is the caller's lease end when Claimed, the other owner's
	// when InProgress.
	LeaseUntil time.Time
	// Fingerprint is the stored record's fingerprint (all but Claimed).
	Fingerprint string
	// Response is the stored response (Completed only).
	Response *Response
	// Steps are the steps the record holds (Claimed by a [StepStore]):
	// those of an earlier attempt, when this claim took over a record
	// whose lease had ended or that was released. Nil for a fresh record.
	Steps map[string]step.Record
}

// Response is a stored response: replayed byte for byte.
type Response struct {
	Status int
	// Header holds the allow-listed headers only (never Set-Cookie).
	Header http.Header
	Body   []byte
	// NotRetained marks a response the request produced but that could
	// not be kept (too large, or its completion failed): the record holds
	// its status and headers, no body, and a retry is told so instead of
	// running the request again. A Store keeps the mark with the record.
	NotRetained bool
}

// Size is the response's size as counted against Config.MaxResponseBytes:
// the body plus every header name and value.
func (r *Response) Size() int {
	n := len(r.Body)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return n
}

// Completion is what [Store.Complete] commits.
type Completion struct {
	// Response is stored on the record and replayed to retries.
	Response Response
	// Work is what the handler attached to the request ([Attach]), in
	// the order attached: the store commits it with the completed record
	// in one transaction. Its types are the store package's own (the
	// DynamoDB writes of idemdynamo.Transact).
	Work []any
}

// Record statuses as stored (the same as package dedupe's).
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
)

// DefaultTTL is how long a record is kept after its last write: 24 hours,
// Stripe's window. A retry after that runs the request again.
const DefaultTTL = 24 * time.Hour

// ErrNotOwner is returned by Extend, Complete and Release when the token no
// longer holds the key: the lease was taken over by another owner, or the
// record was released, completed or expired.
var ErrNotOwner = errors.New("idempotency: not the owner: the claim was taken over, released or completed")

// ErrWorkUnsupported is returned by [Attach] in the transactional mode
// (Config.BeginTxFunc), and wrapped by a Store's Complete given
// Completion.Work it cannot commit (the memory and PostgreSQL stores
// commit none): nothing was committed.
var ErrWorkUnsupported = errors.New("idempotency: work attached to the request cannot be committed by this store or in this mode")

// ErrTooLarge is returned by Complete when the store cannot hold the
// response (the DynamoDB store's 400 KB item limit); nothing was written.
// The middleware then treats the response as too large to store.
var ErrTooLarge = errors.New("idempotency: the response is too large for the store")

// ErrPermanent is wrapped by Complete when the store refused the
// completion for a reason no retry can fix (more writes than one
// transaction takes, a request the database rejects as invalid): nothing
// was written.
var ErrPermanent = errors.New("idempotency: the store refused the completion; retrying cannot help")

// ErrOutcomeUnknown is wrapped by Complete and [Tx.Commit] when the write
// was sent but no answer came back (a timeout, a broken connection): it
// may have been applied. A fenced Release then tells: it fails on a record
// that was completed.
var ErrOutcomeUnknown = errors.New("idempotency: the outcome of the commit is unknown")

// ConditionError reports a condition on one of the handler's own writes
// failing at completion: nothing was committed, the record included.
type ConditionError struct {
	// Index is the failed write's index among the request's writes, in
	// the order they were attached.
	Index int
	// Reason is the store's reason for the failure.
	Reason string
	Err    error
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("idempotency: condition failed on write %d: %s", e.Index, e.Reason)
}

func (e *ConditionError) Unwrap() error { return e.Err }

// RecordKey is the key a Store is given for the client's key within a
// caller's scope: the hex SHA-256 of both, each length-prefixed so no two
// (scope, key) pairs collide. Neither is recoverable from it.
func RecordKey(scope, key string) string {
	b := make([]byte, 8, 8+len(scope)+len(key))
	binary.BigEndian.PutUint64(b, uint64(len(scope)))
	b = append(append(b, scope...), key...)
	return hexSum(sha256.Sum256(b))
}

// hexSum is sum in lower-case hex, made with one allocation (the string).
func hexSum(sum [sha256.Size]byte) string {
	var dst [2 * sha256.Size]byte
	hex.Encode(dst[:], sum[:])
	return string(dst[:])
}
